package vllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors for the conditions callers branch on. They are reached with
// errors.Is through the *[APIError] that carries them.
var (
	// ErrMaxLogprobs: a request asked for more logprobs than the server's
	// --max-logprobs allows. The *[MaxLogprobsError] in the chain holds the cap.
	ErrMaxLogprobs = errors.New("vllm: more logprobs requested than the server allows")
	// ErrContextLength: prompt plus max_tokens exceed the model's context length
	// ("This model's maximum context length is …", or the engine's "The decoder prompt
	// (length N) is longer than the maximum model length of M.").
	ErrContextLength = errors.New("vllm: request exceeds the model's maximum context length")
	// ErrModelNotFound: the requested model (or route) does not exist on the server.
	ErrModelNotFound = errors.New("vllm: model not found")
	// ErrShortPromptLogprobs: a scoring answer's prompt_logprobs has fewer rows than the
	// prompt has tokens. vLLM with a KV connector (LMCache, Mooncake, NIXL) skips the
	// rows of a prefix it loaded from the remote cache, so the teacher's rows for it are
	// missing: nothing is guessed, the scoring fails.
	ErrShortPromptLogprobs = errors.New("vllm: prompt_logprobs is shorter than the prompt, as vLLM answers when a KV connector (LMCache, Mooncake, NIXL) loaded a cached prefix and skipped its rows; run the teacher server without --kv-transfer-config (or with the connector's cache off for scoring)")
)

// APIError is a non-2xx answer from the server. It is decoded from every error shape
// vLLM and its HTTP stack produce: the flat {"object":"error",…} body (vLLM ≤ 0.10.0),
// the nested {"error":{…}} body (0.10.1+), {"error":"text"}, FastAPI's {"detail":…}
// (a string or a list of validation errors) and plain text.
//
// Unwrap returns the condition the error stands for, when it is one of the sentinels,
// so errors.Is(err, ErrMaxLogprobs) and errors.As(err, &*MaxLogprobsError) work through
// it.
type APIError struct {
	// Status is the HTTP status code; it is the primary signal.
	Status int
	// Type is the server's error type, for example "BadRequestError"; "" when the body
	// has none.
	Type string
	// Message is the server's message, or the body's text when it is not JSON.
	Message string
	// Param names the offending request field when the server says so.
	Param string
	// Code is the body's "code" as text ("400"); "" when absent.
	Code string

	cause error
}

// Error reports the status, type and message, followed by what to do when the cause
// is known.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(e.Status))
	if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	if e.Type != "" {
		b.WriteString(" (" + e.Type + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	var ml *MaxLogprobsError
	if errors.As(e.cause, &ml) {
		b.WriteString(" [" + ml.advice() + "]")
	}
	return b.String()
}

// Unwrap returns the sentinel or typed error the answer stands for, or nil.
func (e *APIError) Unwrap() error { return e.cause }

// MaxLogprobsError details [ErrMaxLogprobs]: errors.Is(e, ErrMaxLogprobs) is true.
type MaxLogprobsError struct {
	// Kind is "prompt" or "sample": which of prompt_logprobs / logprobs was too big.
	Kind string
	// Requested is the number asked for, 0 when the message did not say.
	Requested int
	// Max is the server's cap (its --max-logprobs).
	Max int
}

// Error says what the server refused and what to do about it.
func (e *MaxLogprobsError) Error() string {
	return fmt.Sprintf("vllm: %s logprobs of %d requested, the server allows at most %d: %s",
		e.Kind, e.Requested, e.Max, e.advice())
}

func (e *MaxLogprobsError) advice() string {
	k := "K"
	if e.Requested > 0 {
		k = strconv.Itoa(e.Requested)
	}
	return fmt.Sprintf("start vLLM with --max-logprobs %s (or more), or lower the top-K asked for (Config.DistillTopK in agenticopd) to at most %d", k, e.Max)
}

// Is reports whether target is [ErrMaxLogprobs].
func (e *MaxLogprobsError) Is(target error) bool { return target == ErrMaxLogprobs }

// maxLogprobsRe matches vLLM's message case-insensitively: other front ends in front of
// vLLM word its case differently.
var maxLogprobsRe = regexp.MustCompile(`(?i)requested (prompt|sample)? ?logprobs of (-?\d+),? which is greater than (?:the )?max(?:imum)? allowed:? (-?\d+)`)

// DecodeError turns a non-2xx status and its body into an *APIError, whatever the
// body's shape. It never fails: an unreadable body becomes the message.
func DecodeError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	body = bytes.TrimSpace(body)
	if !decodeJSONError(e, body) {
		e.Message = plainText(body)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	e.cause = classify(e)
	return e
}

// decodeJSONError fills e from a JSON error body; false when body is no JSON object.
func decodeJSONError(e *APIError, body []byte) bool {
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	if inner, ok := top["error"]; ok && string(bytes.TrimSpace(inner)) != "null" {
		var s string
		if json.Unmarshal(inner, &s) == nil {
			e.Message = s
			return true
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(inner, &obj) == nil && obj != nil {
			fillFlat(e, obj)
			return true
		}
	}
	if detail, ok := top["detail"]; ok {
		e.Message = detailText(detail)
		return true
	}
	if _, ok := top["message"]; ok {
		fillFlat(e, top)
		return true
	}
	return false
}

// fillFlat reads message/type/param/code from one JSON object.
func fillFlat(e *APIError, obj map[string]json.RawMessage) {
	e.Message = textOf(obj["message"])
	e.Type = textOf(obj["type"])
	e.Param = textOf(obj["param"])
	e.Code = textOf(obj["code"])
}

// textOf renders a JSON scalar as text: strings unquoted, numbers and booleans as
// written, null and anything absent as "". Objects and arrays are kept as JSON.
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// detailText renders FastAPI's detail: a string, or a list of {loc, msg, type}.
func detailText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &items) == nil && len(items) > 0 {
		parts := make([]string, 0, len(items))
		for _, it := range items {
			loc := make([]string, 0, len(it.Loc))
			for _, l := range it.Loc {
				loc = append(loc, fmt.Sprint(l))
			}
			if len(loc) > 0 {
				parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
			} else {
				parts = append(parts, it.Msg)
			}
		}
		return strings.Join(parts, "; ")
	}
	return textOf(raw)
}

// plainText keeps at most 1 KiB of a non-JSON body, as valid UTF-8.
func plainText(body []byte) string {
	const limit = 1 << 10
	cut := len(body) > limit
	if cut {
		body = body[:limit]
	}
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	if cut {
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// classify maps an answer to the sentinel it stands for, or nil.
func classify(e *APIError) error {
	msg := e.Message
	if m := maxLogprobsRe.FindStringSubmatch(msg); m != nil {
		req, _ := strconv.Atoi(m[2])
		capN, _ := strconv.Atoi(m[3])
		kind := strings.ToLower(m[1])
		if kind == "" {
			kind = "sample"
		}
		return &MaxLogprobsError{Kind: kind, Requested: req, Max: capN}
	}
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "maximum context length"), // the OpenAI server's check
		strings.Contains(lower, "maximum model length"): // the V1 engine's "The decoder prompt (length N) is longer than …"
		return ErrContextLength
	case e.Status == http.StatusNotFound && (e.Type == "NotFoundError" || strings.Contains(lower, "does not exist") || strings.Contains(lower, "model")):
		return ErrModelNotFound
	case strings.Contains(lower, "does not exist") && strings.Contains(lower, "model"):
		return ErrModelNotFound
	}
	return nil
}
