package vllmtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/internal/fakehttp"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// statusWriter records the answered status before any byte reaches the client, so a
// test that has read a response always sees its status in [Server.Requests].
type statusWriter struct {
	http.ResponseWriter
	s     *Server
	e     *fakehttp.Entry[Request]
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.s.setStatus(w.e, code, false)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijacking not supported")
	}
	return hj.Hijack()
}

type route struct {
	method string
	h      func(http.ResponseWriter, *http.Request, []byte)
}

func (s *Server) buildRoutes() {
	s.routes = map[string]route{
		"/v1/models":           {http.MethodGet, s.handleModels},
		"/health":              {http.MethodGet, s.handleHealth},
		"/ping":                {http.MethodGet, s.handleHealth},
		"/version":             {http.MethodGet, s.handleVersion},
		"/tokenize":            {http.MethodPost, s.handleTokenize},
		"/detokenize":          {http.MethodPost, s.handleDetokenize},
		"/v1/completions":      {http.MethodPost, s.handleCompletions},
		"/v1/chat/completions": {http.MethodPost, s.handleChatCompletions},
	}
}

func (s *Server) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		panic(http.ErrAbortHandler)
	}
	defer s.inflight.Done()
	body, err := readBody(r)
	e := s.record(r, body)
	w := &statusWriter{ResponseWriter: rw, s: s, e: e}
	if err != nil {
		s.writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return
	}
	if s.applyFaults(w, r, e) {
		return
	}
	rt, ok := s.routes[r.URL.Path]
	switch {
	case !ok:
		writeDetail(w, http.StatusNotFound, "Not Found")
	case r.Method != rt.method && !(r.URL.Path == "/ping" && r.Method == http.MethodPost):
		writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
	case rt.method == http.MethodPost && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		writeDetail(w, http.StatusUnsupportedMediaType, "Unsupported Media Type: Only 'application/json' is allowed")
	default:
		rt.h(w, r, body)
	}
}

// readBody reads a request body of up to 1 GiB, in one allocation when its length is
// stated.
func readBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= 1<<30 {
		body := make([]byte, n)
		_, err := io.ReadFull(r.Body, body)
		return body, err
	}
	return io.ReadAll(io.LimitReader(r.Body, 1<<30))
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"detail": detail})
}

// apiError is an error answered in vLLM's ErrorResponse shape.
type apiError struct {
	status  int
	message string
	param   string
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusUnauthorized:
		return "UnauthorizedError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusTooManyRequests:
		return "TooManyRequestsError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	default:
		if status >= 500 {
			return "InternalServerError"
		}
		return "BadRequestError"
	}
}

func (s *Server) writeError(w http.ResponseWriter, status int, message string) {
	s.writeAPIError(w, &apiError{status: status, message: message})
}

func (s *Server) writeAPIError(w http.ResponseWriter, e *apiError) {
	var param any
	if e.param != "" {
		param = e.param
	}
	fields := map[string]any{"message": e.message, "type": errorType(e.status), "param": param, "code": e.status}
	var body any = map[string]any{"error": fields}
	if s.cfg.flatErrors {
		fields["object"] = "error"
		body = fields
	}
	writeJSON(w, e.status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody decodes a JSON request body, answering 400 on failure.
func (s *Server) decodeBody(w http.ResponseWriter, body []byte, v any) bool {
	if err := json.Unmarshal(body, v); err != nil {
		s.writeAPIError(w, badRequest("1 validation error: invalid JSON body: %v", err))
		return false
	}
	return true
}

func (s *Server) checkModel(name string) *apiError {
	if name != "" && name != s.cfg.model {
		return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("The model `%s` does not exist.", name), param: "model"}
	}
	return nil
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request, _ []byte) {
	now := time.Now().Unix()
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []any{map[string]any{
			"id": s.cfg.model, "object": "model", "created": now, "owned_by": "vllm",
			"root": s.cfg.model, "parent": nil, "max_model_len": s.cfg.maxModelLen,
			"permission": []any{map[string]any{
				"id": "modelperm-vllmtest", "object": "model_permission", "created": now,
				"allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true,
				"allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false,
				"organization": "*", "group": nil, "is_blocking": false,
			}},
		}},
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request, _ []byte) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.version})
}

type tokenizeRequest struct {
	Model                string            `json:"model"`
	Prompt               *string           `json:"prompt"`
	Messages             []wireMessage     `json:"messages"`
	Tools                []json.RawMessage `json:"tools"`
	AddGenerationPrompt  *bool             `json:"add_generation_prompt"`
	ContinueFinalMessage bool              `json:"continue_final_message"`
	ChatTemplateKwargs   map[string]any    `json:"chat_template_kwargs"`
	ReturnTokenStrs      bool              `json:"return_token_strs"`
}

func (s *Server) handleTokenize(w http.ResponseWriter, _ *http.Request, body []byte) {
	var req tokenizeRequest
	if !s.decodeBody(w, body, &req) {
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		s.writeAPIError(w, e)
		return
	}
	var ids []int32
	switch {
	case req.Prompt != nil:
		ids = s.tok.encode(*req.Prompt)
	case req.Messages != nil:
		text, e := s.renderRequest(req.Messages, req.Tools, req.AddGenerationPrompt, req.ContinueFinalMessage, req.ChatTemplateKwargs)
		if e != nil {
			s.writeAPIError(w, e)
			return
		}
		ids = s.tok.encode(text)
	default:
		s.writeAPIError(w, badRequest("1 validation error: either `prompt` or `messages` must be given"))
		return
	}
	if !req.ReturnTokenStrs {
		writeTokenized(w, ids, s.cfg.maxModelLen)
		return
	}
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = string(s.tok.pieces[id])
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ids), "max_model_len": s.cfg.maxModelLen, "tokens": nonNil(ids), "token_strs": strs})
}

// writeTokenized answers a /tokenize request without token strings: the bytes
// writeJSON writes for its map (keys in sorted order, a final newline), with the ids
// formatted straight into one buffer.
func writeTokenized(w http.ResponseWriter, ids []int32, maxModelLen int) {
	b := make([]byte, 0, 72+7*len(ids)) // AppendInt32 wants 8 bytes of room after the last id
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, int64(len(ids)), 10)
	b = append(b, `,"max_model_len":`...)
	b = strconv.AppendInt(b, int64(maxModelLen), 10)
	b = append(b, `,"token_strs":null,"tokens":`...)
	b = jsonscan.AppendInt32s(b, ids)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// renderRequest renders a chat-form request to template text.
func (s *Server) renderRequest(msgs []wireMessage, tools []json.RawMessage, addGen *bool, contFinal bool, kwargs map[string]any) (string, *apiError) {
	p := renderParams{tools: tools, addGenerationPrompt: addGen == nil || *addGen, continueFinal: contFinal, thinkingTemplate: s.cfg.thinking,
		thinkingOnly: s.cfg.thinkOnly}
	if v, ok := kwargs["enable_thinking"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return "", badRequest("chat_template_kwargs.enable_thinking must be a boolean, got %v", v)
		}
		p.enableThinking = &b
	}
	text, err := renderChat(msgs, p)
	if err != nil {
		return "", badRequest("%s", err.Error())
	}
	return text, nil
}

func (s *Server) handleDetokenize(w http.ResponseWriter, _ *http.Request, body []byte) {
	var req struct {
		Model  string  `json:"model"`
		Tokens []int32 `json:"tokens"`
	}
	if !s.decodeBody(w, body, &req) {
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		s.writeAPIError(w, e)
		return
	}
	text, err := s.tok.decode(req.Tokens, false)
	if err != nil {
		s.writeAPIError(w, badRequest("%s", err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": text})
}
