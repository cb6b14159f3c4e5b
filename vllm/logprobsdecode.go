package vllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// errSlowPath makes decodeCompletionLogprobs hand a value to encoding/json.
var errSlowPath = errors.New("vllm: logprobs block needs encoding/json")

// decodeCompletionLogprobs reads a choice's "logprobs" member into *dst as
// json.Unmarshal would, without reflection on the common shape (exact lower-case keys,
// each once). Any other shape, and any malformed value, goes through json.Unmarshal,
// so results and errors are those of encoding/json.
//
// With decodeNoTopLogprobs, top_logprobs is left nil on either path.
//
// A document held whole is read in place first, where the block has only the four
// known keys; whatever that refuses is read again from the block's start as a
// stream's is: the value's bytes are taken (s.Skip), then read.
func decodeCompletionLogprobs(s *jsonscan.Scanner, dst **CompletionLogprobs, mode decodeMode) error {
	if !s.Streaming() {
		start := s.Pos
		if lp, err := fastCompletionLogprobs(s, mode, false); err == nil {
			*dst = lp
			return nil
		}
		s.Pos = start
	}
	raw, err := s.Skip()
	if err != nil {
		return err
	}
	if string(raw) == "null" {
		return nil
	}
	if lp, err := fastCompletionLogprobs(&jsonscan.Scanner{Data: raw}, mode, true); err == nil {
		*dst = lp
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return err
	}
	if mode == decodeNoTopLogprobs && *dst != nil {
		(*dst).TopLogprobs = nil
	}
	return nil
}

var logprobsKeys = []string{"tokens", "token_logprobs", "top_logprobs", "text_offset"}

// fastCompletionLogprobs reads the logprobs object at s, without reflection.
// whole says that s holds the object and nothing more, whose other members are then
// skipped; otherwise another member is errSlowPath.
func fastCompletionLogprobs(s *jsonscan.Scanner, mode decodeMode, whole bool) (*CompletionLogprobs, error) {
	out := &CompletionLogprobs{}
	seen := map[string]bool{}
	err := s.Object(false, func(k []byte) error {
		key := string(k)
		if seen[key] {
			return errSlowPath // a repeated key: encoding/json's merging rules apply
		}
		seen[key] = true
		switch key {
		case "tokens":
			return fastStrings(s, &out.Tokens)
		case "token_logprobs":
			return fastOptFloats(s, &out.TokenLogprobs)
		case "top_logprobs":
			return fastTopLogprobs(s, &out.TopLogprobs, mode != decodeNoTopLogprobs)
		case "text_offset":
			return fastInts(s, &out.TextOffset)
		}
		if !whole {
			return errSlowPath // Skip bounds nesting from the block's start
		}
		for _, known := range logprobsKeys {
			if strings.EqualFold(key, known) {
				return errSlowPath // encoding/json matches keys without regard to case
			}
		}
		_, err := s.Skip()
		return err
	})
	if err != nil {
		return nil, err
	}
	if !whole {
		return out, nil
	}
	return out, s.End()
}

func fastStrings(s *jsonscan.Scanner, dst *[]string) error {
	if s.Null() {
		return nil
	}
	out := []string{}
	err := s.Array(false, func(int) error {
		if s.Null() {
			out = append(out, "")
			return nil
		}
		str, err := s.String()
		if err == nil && !utf8.ValidString(str) {
			return errSlowPath // encoding/json replaces invalid UTF-8
		}
		out = append(out, str)
		return err
	})
	*dst = out
	return err
}

func fastOptFloats(s *jsonscan.Scanner, dst *[]*float32) error {
	if s.Null() {
		return nil
	}
	out := []*float32{}
	var vals []float32 // the values out points into, allocated a block at a time
	err := s.Array(false, func(int) error {
		if s.Null() {
			out = append(out, nil)
			return nil
		}
		f, err := fastFloat32(s)
		if len(vals) == cap(vals) {
			vals = make([]float32, 0, min(max(2*cap(vals), 64), 4096))
		}
		vals = append(vals, f)
		out = append(out, &vals[len(vals)-1])
		return err
	})
	*dst = out
	return err
}

// fastTopLogprobs reads top_logprobs into *dst when keep, and otherwise only checks
// it as strictly, leaving *dst nil.
func fastTopLogprobs(s *jsonscan.Scanner, dst *[]map[string]float32, keep bool) error {
	if s.Null() {
		return nil
	}
	out := []map[string]float32{}
	err := s.Array(false, func(int) error {
		if s.Null() {
			if keep {
				out = append(out, nil)
			}
			return nil
		}
		var m map[string]float32
		if keep {
			m = map[string]float32{}
			out = append(out, m)
		}
		return s.Object(false, func(k []byte) error {
			if !utf8.Valid(k) {
				return errSlowPath // encoding/json replaces invalid UTF-8
			}
			if !keep {
				return checkFloat32(s)
			}
			f, err := fastFloat32(s)
			m[string(k)] = f
			return err
		})
	})
	if keep {
		*dst = out
	}
	return err
}

func fastInts(s *jsonscan.Scanner, dst *[]int) error {
	if s.Null() {
		return nil
	}
	out := []int{}
	err := s.Array(false, func(int) error {
		if s.Null() {
			out = append(out, 0)
			return nil
		}
		num, err := s.Number()
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(string(num))
		out = append(out, n)
		return err
	})
	*dst = out
	return err
}

// checkFloat32 reads a number and fails where fastFloat32 fails, without converting
// it when it cannot fail: a number written without exponent and with at most 38
// digits before any point is below float32's largest, and parsing one that is too
// small to represent gives 0 without an error.
func checkFloat32(s *jsonscan.Scanner) error {
	num, err := s.Number()
	if err != nil {
		return err
	}
	digits := len(num)
	if i := bytes.IndexByte(num, '.'); i >= 0 {
		digits = i
	}
	if num[0] == '-' {
		digits--
	}
	if digits <= 38 && !bytes.ContainsAny(num, "eE") {
		return nil
	}
	_, err = strconv.ParseFloat(string(num), 32)
	return err
}

// fastFloat32 reads a number as encoding/json reads it into a float32.
func fastFloat32(s *jsonscan.Scanner) (float32, error) {
	num, err := s.Number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(num), 32)
	return float32(f), err
}
