package vllm

import (
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
func decodeCompletionLogprobs(s *jsonscan.Scanner, dst **CompletionLogprobs) error {
	raw, err := s.Skip()
	if err != nil {
		return err
	}
	if string(raw) == "null" {
		return nil
	}
	if lp, err := fastCompletionLogprobs(raw); err == nil {
		*dst = lp
		return nil
	}
	return json.Unmarshal(raw, dst)
}

var logprobsKeys = []string{"tokens", "token_logprobs", "top_logprobs", "text_offset"}

func fastCompletionLogprobs(raw []byte) (*CompletionLogprobs, error) {
	s := &jsonscan.Scanner{Data: raw}
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
			return fastTopLogprobs(s, &out.TopLogprobs)
		case "text_offset":
			return fastInts(s, &out.TextOffset)
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
	err := s.Array(false, func(int) error {
		if s.Null() {
			out = append(out, nil)
			return nil
		}
		f, err := fastFloat32(s)
		out = append(out, &f)
		return err
	})
	*dst = out
	return err
}

func fastTopLogprobs(s *jsonscan.Scanner, dst *[]map[string]float32) error {
	if s.Null() {
		return nil
	}
	out := []map[string]float32{}
	err := s.Array(false, func(int) error {
		if s.Null() {
			out = append(out, nil)
			return nil
		}
		m := map[string]float32{}
		out = append(out, m)
		return s.Object(false, func(k []byte) error {
			if !utf8.Valid(k) {
				return errSlowPath // encoding/json replaces invalid UTF-8
			}
			key := string(k)
			f, err := fastFloat32(s)
			m[key] = f
			return err
		})
	})
	*dst = out
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

// fastFloat32 reads a number as encoding/json reads it into a float32.
func fastFloat32(s *jsonscan.Scanner) (float32, error) {
	num, err := s.Number()
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(num), 32)
	return float32(f), err
}
