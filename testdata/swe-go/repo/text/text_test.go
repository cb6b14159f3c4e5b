package text

import "testing"

func TestReverseASCII(t *testing.T) {
	if got := Reverse("stressed"); got != "desserts" {
		t.Errorf("Reverse(%q) = %q, want %q", "stressed", got, "desserts")
	}
}

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"simple", "one two three", 3},
		{"empty", "", 0},
		{"spaces", "  a \t b\n", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Words(tc.in); got != tc.want {
				t.Errorf("Words(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}
