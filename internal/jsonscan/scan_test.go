package jsonscan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

func TestString(t *testing.T) {
	tests := []struct {
		name, in, want string
		pos            int
	}{
		{"plain", `"abc" x`, "abc", 5},
		{"empty", `""`, "", 2},
		{"leading space", " \t\n\r\"a\"", "a", 7},
		{"escapes", `"a\"b\\c\/d\n\t"`, "a\"b\\c/d\n\t", 16},
		{"unicode escape", `"caf\u00e9"`, "café", 11},
		{"surrogate pair", `"\ud83d\ude00"`, "😀", 14},
		{"lone surrogate", `"\ud800x"`, "\ufffdx", 9},
		{"raw utf-8", `"żółw"`, "żółw", 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := jsonscan.Scanner{Data: []byte(tc.in)}
			got, err := s.String()
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.pos, s.Pos)
		})
	}
}

func TestStringErrors(t *testing.T) {
	tests := []struct {
		name, in string
		end      bool // ErrUnexpectedEnd rather than a SyntaxError
		want     string
		offset   int
	}{
		{"unterminated", `"abc`, true, "", 0},
		{"backslash at end", `"abc\`, true, "", 0},
		{"empty input", ``, true, "", 0},
		{"not a string", ` 12`, false, `want '"', found '1'`, 1},
		{"control character", "\"a\x01b\"", false, "control character in string", 2},
		{"raw newline", "\"a\nb\"", false, "control character in string", 2},
		{"bad escape", `"a\qb"`, false, "bad string: invalid character 'q' in string escape code", 6},
		{"short unicode escape", `"\u12"`, false, "bad string", 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := jsonscan.Scanner{Data: []byte(tc.in)}
			_, err := s.String()
			if tc.end {
				require.ErrorIs(t, err, jsonscan.ErrUnexpectedEnd)
				return
			}
			var se *jsonscan.SyntaxError
			require.ErrorAs(t, err, &se)
			require.Contains(t, se.Msg, tc.want)
			require.Equal(t, tc.offset, se.Offset)
		})
	}
}

func TestKeys(t *testing.T) {
	s := jsonscan.Scanner{Data: []byte(` "rank": 1, "r\u0061nk" :2, "x" 3`)}
	require.False(t, s.KnownKey(`"logprob":`))
	require.True(t, s.KnownKey(`"rank":`))
	n, err := s.Int32()
	require.NoError(t, err)
	require.Equal(t, int32(1), n)
	require.True(t, s.Consume(','))
	require.False(t, s.KnownKey(`"rank":`), "an escaped key is not matched literally")
	k, err := s.Key()
	require.NoError(t, err)
	require.Equal(t, "rank", string(k))
	n, err = s.Int32()
	require.NoError(t, err)
	require.Equal(t, int32(2), n)
	require.NoError(t, s.Expect(','))
	_, err = s.Key()
	require.EqualError(t, err, `JSON offset 32: want ':', found '3'`)
}

func TestNumber(t *testing.T) {
	tests := []struct {
		in, want string // want "" for an error
		msg      string
	}{
		{"0", "0", ""},
		{"-0", "-0", ""},
		{" 12,", "12", ""},
		{"1.5e+3]", "1.5e+3", ""},
		{"-2.25E-7", "-2.25E-7", ""},
		{"01", "0", ""}, // the number ends at the second digit; what follows is not ours
		{"1e5x", "1e5", ""},
		{"-", "", "want a number"},
		{"+1", "", "want a number"},
		{".5", "", "want a number"},
		{"Infinity", "", "want a number"},
		{"NaN", "", "want a number"},
		{"1.", "", "bad number"},
		{"1.e3", "", "bad number"},
		{"1e", "", "bad number"},
		{"1e+", "", "bad number"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			s := jsonscan.Scanner{Data: []byte(tc.in)}
			got, err := s.Number()
			if tc.want == "" {
				require.ErrorContains(t, err, tc.msg)
				require.Equal(t, len(tc.in)-len(strings.TrimLeft(tc.in, " ")), s.Pos, "an error consumes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
			require.Equal(t, strings.Index(tc.in, tc.want)+len(tc.want), s.Pos)
		})
	}
}

func TestValidNumber(t *testing.T) {
	for in, want := range map[string]bool{
		"0": true, "-0": true, "10": true, "1.5": true, "1e9": true, "1E+9": true, "-1.5e-9": true,
		"": false, "-": false, "01": false, "1.": false, ".5": false, "+1": false, "1e": false,
		" 1": false, "1 ": false, "0x10": false, "1_0": false, "Inf": false, "NaN": false,
	} {
		require.Equal(t, want, jsonscan.ValidNumber([]byte(in)), "%q", in)
	}
}

func TestFloat32AndInt32(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float32
		msg  string
	}{
		{"-0.75", -0.75, ""},
		{"-9999.0", -9999, ""},
		{"3e38", 3e38, ""},
		{"1e39", 0, "number 1e39 is not a finite float32"},
		{"-1e999", 0, "not a finite float32"},
		{`"1"`, 0, "want a number"},
	} {
		s := jsonscan.Scanner{Data: []byte(tc.in)}
		got, err := s.Float32()
		if tc.msg != "" {
			require.ErrorContains(t, err, tc.msg, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	for _, tc := range []struct {
		in   string
		want int32
		msg  string
	}{
		{"0", 0, ""},
		{"-7", -7, ""},
		{"2147483647", 2147483647, ""},
		{"-2147483648", -2147483648, ""},
		{"2147483648", 0, "out of range"},
		{"-2147483649", 0, "out of range"},
		{"99999999999", 0, "out of range"},
		{"1.5", 0, "not an integer"},
		{"1e3", 0, "not an integer"},
		{"x", 0, "want a number"},
	} {
		s := jsonscan.Scanner{Data: []byte(tc.in)}
		got, err := s.Int32()
		if tc.msg != "" {
			require.ErrorContains(t, err, tc.msg, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	_, err := jsonscan.ParseInt32(nil)
	require.ErrorContains(t, err, "out of range")
}

func TestSkip(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"object", `{"a":[1,{"b":null}],"c":"}"} ,`, `{"a":[1,{"b":null}],"c":"}"}`},
		{"array", ` [ true , false , null , -1.5e3 , "x\"]" ] x`, `[ true , false , null , -1.5e3 , "x\"]" ]`},
		{"empty containers", `[{},[],{"a":{}}]`, `[{},[],{"a":{}}]`},
		{"string", `"a\"b" 1`, `"a\"b"`},
		{"number", `-0.5]`, `-0.5`},
		{"literal", `false,`, `false`},
		{"bad escape passes", `"\q"`, `"\q"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := jsonscan.Scanner{Data: []byte(tc.in)}
			raw, err := s.Skip()
			require.NoError(t, err)
			require.Equal(t, tc.want, string(raw))
			require.Equal(t, strings.Index(tc.in, tc.want)+len(tc.want), s.Pos)
		})
	}
}

func TestSkipErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"trailing comma", `[1,]`, `JSON offset 3: unexpected ']'`},
		{"missing colon", `{"a" 1}`, `JSON offset 5: want ':', found '1'`},
		{"key not a string", `{1:2}`, `JSON offset 1: want '"', found '1'`},
		{"bad literal", `[tru]`, `JSON offset 1: unexpected 't'`},
		{"NaN", `[NaN]`, `JSON offset 1: unexpected 'N'`},
		{"bad number", `[1.]`, `JSON offset 1: bad number`},
		{"missing comma", `[1 2]`, `JSON offset 3: want ']', found '2'`},
		{"control character", "[\"\x00\"]", `JSON offset 2: control character in string`},
		{"too deep", strings.Repeat("[", 514) + strings.Repeat("]", 514), `JSON offset 513: nesting deeper than 512`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := jsonscan.Scanner{Data: []byte(tc.in)}
			_, err := s.Skip()
			require.EqualError(t, err, tc.want)
		})
	}
	deep := strings.Repeat("[", 514) + strings.Repeat("]", 514)
	s := jsonscan.Scanner{Data: []byte(deep), MaxDepth: 513}
	raw, err := s.Skip()
	require.NoError(t, err, "MaxDepth raises the limit")
	require.Len(t, raw, len(deep))
}

// TestTruncated cuts a document at every offset: each prefix is refused, and a cut
// inside a string, a container or after a key reports ErrUnexpectedEnd.
func TestTruncated(t *testing.T) {
	doc := `{"a": [1, -2.5e3, true, null, {"b": "c\"\u00e9"}], "d": {}}`
	for i := range len(doc) {
		s := jsonscan.Scanner{Data: []byte(doc[:i])}
		_, err := s.Skip()
		if err == nil {
			err = s.End()
		}
		require.Error(t, err, "prefix %q", doc[:i])
	}
	for _, in := range []string{``, `  `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `[`, `[1,`, `["x`, `"ab\`} {
		s := jsonscan.Scanner{Data: []byte(in)}
		_, err := s.Skip()
		require.ErrorIs(t, err, jsonscan.ErrUnexpectedEnd, "%q", in)
	}
}

func TestObjectAndArray(t *testing.T) {
	s := jsonscan.Scanner{Data: []byte(`{"xs": [1, 2, 3], "skip": {"y": [null]}, "n": null, "m": {"k": 4}}`)}
	var xs []int32
	got := map[string]int32{}
	err := s.Object(false, func(k []byte) error {
		switch string(k) {
		case "xs":
			return s.Array(true, func(i int) error {
				require.Equal(t, len(xs), i)
				v, err := s.Int32()
				xs = append(xs, v)
				return err
			})
		case "n", "m":
			return s.Object(true, func(k []byte) error {
				v, err := s.Int32()
				got[string(k)] = v
				return err
			})
		}
		_, err := s.Skip()
		return err
	})
	require.NoError(t, err)
	require.NoError(t, s.End())
	if d := cmp.Diff([]int32{1, 2, 3}, xs); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]int32{"k": 4}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestContainerErrors(t *testing.T) {
	skip := func(s *jsonscan.Scanner) func(int) error {
		return func(int) error { _, err := s.Skip(); return err }
	}
	tests := []struct {
		name, in string
		read     func(s *jsonscan.Scanner) error
		want     string
	}{
		{"null array refused", `null`, func(s *jsonscan.Scanner) error { return s.Array(false, skip(s)) }, `JSON offset 0: want '[', found 'n'`},
		{"null object refused", `null`, func(s *jsonscan.Scanner) error {
			return s.Object(false, func([]byte) error { return nil })
		}, `JSON offset 0: want '{', found 'n'`},
		{"array trailing comma", `[1,]`, func(s *jsonscan.Scanner) error { return s.Array(false, skip(s)) }, `JSON offset 3: unexpected ']'`},
		{"array truncated", `[1`, func(s *jsonscan.Scanner) error { return s.Array(false, skip(s)) }, `unexpected end of JSON input`},
		{"object missing comma", `{"a":1 "b":2}`, func(s *jsonscan.Scanner) error {
			return s.Object(false, func([]byte) error { _, err := s.Skip(); return err })
		}, `JSON offset 7: want '}', found '"'`},
		{"elem error stops", `[1,2]`, func(s *jsonscan.Scanner) error {
			return s.Array(false, func(i int) error { return errors.New("stop") })
		}, `stop`},
		{"data after", `[] x`, func(s *jsonscan.Scanner) error {
			if err := s.Array(false, skip(s)); err != nil {
				return err
			}
			return s.End()
		}, `JSON offset 3: data after the top-level value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.read(&jsonscan.Scanner{Data: []byte(tc.in)}), tc.want)
		})
	}
}

func TestUnmarshalNext(t *testing.T) {
	s := jsonscan.Scanner{Data: []byte(`[{"a": 1}, {"a": "x"}]`)}
	var first, second struct{ A int }
	require.NoError(t, s.Expect('['))
	require.NoError(t, s.UnmarshalNext(&first))
	require.Equal(t, 1, first.A)
	require.NoError(t, s.Expect(','))
	err := s.UnmarshalNext(&second)
	require.ErrorContains(t, err, "JSON offset 11: json: cannot unmarshal string")
}

func TestNull(t *testing.T) {
	for in, want := range map[string]bool{"null": true, " null,": true, "nul": false, "nil": false, "": false, "true": false} {
		s := jsonscan.Scanner{Data: []byte(in)}
		require.Equal(t, want, s.Null(), "%q", in)
	}
}
