// Package text holds small string helpers.
package text

import "strings"

// Reverse returns s with its characters in reverse order.
func Reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// Words returns the number of words in s, separated by white space.
func Words(s string) int {
	return len(strings.Fields(s))
}
