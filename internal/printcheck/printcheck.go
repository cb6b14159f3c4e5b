// Package printcheck finds two faults of printed text that tests of the programs and
// of error messages look for: a prefix repeated by two layers that each wrap an error
// with their own name ("reward: sandbox: sandbox: …", "rollout 3 of task x: task
// x: …"), and a figure printed with the noise of binary floating point
// ("0.8262499999999998", "0.30000000000000004").
package printcheck

import (
	"regexp"
	"strings"
)

// RepeatedPrefix returns the first part of s that two consecutive ": "-separated
// parts of one line repeat: the same part twice, or a part that ends with the next
// one, of two words or more, at a word boundary ("rollout 3 of task x" then "task x";
// "grading sandbox" then "sandbox" is a name and its package's own prefix). It
// returns "" when there is none.
func RepeatedPrefix(s string) string {
	for _, line := range strings.Split(s, "\n") {
		parts := strings.Split(line, ": ")
		for i := 1; i < len(parts); i++ {
			prev, cur := strings.TrimSpace(parts[i-1]), strings.TrimSpace(parts[i])
			if cur != "" && (cur == prev || strings.Contains(cur, " ") && strings.HasSuffix(prev, " "+cur)) {
				return cur
			}
		}
	}
	return ""
}

// noiseRE matches a decimal number whose digits end in a long run of 0s followed by
// a digit, or of 9s: the shortest form of a float64 that a sum or a quotient put
// next to a short decimal.
var noiseRE = regexp.MustCompile(`\d\.\d*(0{6,}[1-9]|9{6,})\d*`)

// FloatNoise returns the first number in s printed with float noise, or "".
func FloatNoise(s string) string { return noiseRE.FindString(s) }
