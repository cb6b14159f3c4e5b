package vllmtest

import "github.com/agentic-opd/agenticopd/vllm"

// Client returns a [vllm.Client] for this server, with the served model name set and
// opts applied after it. It panics if the client cannot be built, which only a bad
// option can cause.
func (s *Server) Client(opts ...vllm.Option) *vllm.Client {
	all := append([]vllm.Option{vllm.WithModel(s.cfg.model)}, opts...)
	c, err := vllm.NewClient(s.URL, all...)
	if err != nil {
		panic("vllmtest: " + err.Error())
	}
	return c
}
