package vllm

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

var tokenizeKeys = []string{"count", "max_model_len", "tokens", "token_strs"}

// decodeTokenizeResponse reads a /tokenize answer as json.Unmarshal would, reading the
// ids with the scanner on the common shape (exact lower-case keys, each once); any
// other shape, and any malformed value, goes through json.Unmarshal, so results and
// errors are those of encoding/json.
func decodeTokenizeResponse(raw []byte) (TokenizeResponse, error) {
	if out, err := fastTokenizeResponse(raw); err == nil {
		return out, nil
	}
	var out TokenizeResponse
	err := json.Unmarshal(raw, &out)
	return out, err
}

func fastTokenizeResponse(raw []byte) (TokenizeResponse, error) {
	var out TokenizeResponse
	s := &jsonscan.Scanner{Data: raw}
	seen := map[string]bool{}
	err := s.Object(false, func(k []byte) error {
		key := string(k)
		if seen[key] {
			return errSlowPath
		}
		seen[key] = true
		var err error
		switch key {
		case "count":
			out.Count, err = fastInt(s)
		case "max_model_len":
			out.MaxModelLen, err = fastInt(s)
		case "tokens":
			out.Tokens, err = s.Int32s()
		case "token_strs":
			err = fastStrings(s, &out.TokenStrs)
		default:
			for _, known := range tokenizeKeys {
				if strings.EqualFold(key, known) {
					return errSlowPath // encoding/json matches keys without regard to case
				}
			}
			_, err = s.Skip()
		}
		return err
	})
	if err != nil {
		return TokenizeResponse{}, err
	}
	return out, s.End()
}

// fastInt reads an integer as encoding/json reads it into an int (a null leaves 0).
func fastInt(s *jsonscan.Scanner) (int, error) {
	if s.Null() {
		return 0, nil
	}
	num, err := s.Number()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(num))
}
