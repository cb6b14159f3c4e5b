// Package vllmtest is an in-process fake of vLLM's OpenAI-compatible server, for tests
// and demos. It is a simulator, not an inference engine: its "model" is a small
// deterministic function of the last few token ids, good for exercising token
// accounting, logprob plumbing, error handling and agent loops without a GPU, and for
// nothing else.
//
// It speaks real HTTP on a loopback port with vLLM's paths and JSON, so the real
// [github.com/agentic-opd/agenticopd/vllm] client is what gets tested:
//
//	s := vllmtest.NewServer(t)            // closed by t.Cleanup
//	resp, err := http.Post(s.URL+"/tokenize", "application/json", body)
//
// Programs (the quickstart) use [Start] and [Server.Close] instead.
//
// # Endpoints
//
// GET /v1/models, /health, /version, /ping; POST /tokenize (prompt form and chat form
// with messages, tools, add_generation_prompt, continue_final_message and
// chat_template_kwargs), /detokenize, /v1/completions and /v1/chat/completions.
// Unknown paths answer FastAPI's {"detail":"Not Found"}, wrong methods 405 and a
// missing application/json content type 415.
//
// # The tokenizer
//
// A byte-level BPE learned at start-up (once per process, deterministically) from an
// embedded text of English, Python, JSON and agent transcripts: 256 byte tokens, the
// special tokens [EndOfText], [ImStart], [ImEnd], [ToolCall], [ToolCallEnd],
// [ToolResponse], [ToolResponseEnd], [Think], [ThinkEnd], then about 800 merges. Text
// is pre-split the way Qwen2's pre-tokenizer pattern splits it, so tokens like " the",
// "\n\n" and "):\n" exist and tokenize(a+b) often differs from tokenize(a)+tokenize(b).
// Special-token literals in any text become the special ids, as with Hugging Face
// tokenizers; no BOS is ever added.
//
// # The chat template
//
// Qwen2.5/Qwen3 ChatML: "<|im_start|>{role}\n{content}<|im_end|>\n" per message, no
// default system prompt (Qwen3 behaviour), tools in the system turn under "# Tools"
// (each tool as vLLM's validation dumps it, with a null description or parameters when
// absent, re-serialised like the template's tojson filter), assistant tool calls as
// "<tool_call>\n{"name": …, "arguments": …}\n</tool_call>" blocks after the content,
// runs of tool messages merged into one user turn of <tool_response> blocks, and the
// generation prompt "<|im_start|>assistant\n" (followed by "<think>\n\n</think>\n\n"
// when chat_template_kwargs has enable_thinking: false). With [WithThinkingTemplate],
// assistant turns follow Qwen3's hybrid-thinking rules: reasoning survives only after
// the last user query, so re-rendering a conversation can fail to extend the tokens a
// client already holds. With [WithThinkingOnlyTemplate], the generation prompt always
// opens a thought ("<|im_start|>assistant\n<think>\n"), as a thinking-only model's
// template does whatever enable_thinking says.
//
// # The language model
//
// Logits over the whole vocabulary are a fixed base (corpus frequencies) plus positive
// boosts for a few ids chosen from the last three ids (corpus successors of the
// previous token, and hashed picks that depend on [WithModelSeed]). The log-softmax is
// exact, so top-K, ranks, prompt logprobs and sampled-token logprobs agree with each
// other and sum to one over the vocabulary. <|im_end|> carries about 3% of the mass, so
// unscripted turns end after a few dozen tokens. Sampling honours temperature (0 is
// greedy), top_p, top_k, min_p, repetition_penalty, presence_penalty,
// frequency_penalty, n and a per-request seed (same seed and prompt, same output).
// [WithGenerationConfig] gives the server model defaults for the fields a request
// leaves out, as vLLM's --generation-config auto does; [LeftToServer] names the fields
// a recorded request left to them.
// Returned logprobs are raw (untempered), as in vLLM's default logprobs mode.
//
// # Scripts
//
// [WithAgentScript] decides what assistant turns say on /v1/completions (the agent
// loop); [WithChatScript] decides what /v1/chat/completions answers (a judge). Scripted
// text is tokenized, closed with <|im_end|>, cut at max_tokens, and reported with the
// model's own logprobs for those ids. Scripts run concurrently.
//
// # Inspection and faults
//
// Every request is recorded ([Server.Requests], [Server.RequestCount]). [Server.AddFault]
// injects status codes, malformed bodies, dropped connections and latency (which gives
// up when the client does), on every request or every Nth, a limited number of times.
//
// # Faithful
//
//   - paths, request fields, defaults (max_tokens 16 on completions, n 1,
//     add_generation_prompt true) and response JSON, with null for absent optional
//     fields;
//   - prompt_logprobs: null first element, id-string keys, {logprob, rank,
//     decoded_token}, the actual token first then the top-k, k or k+1 entries, -9999
//     for −∞; duplicated per choice; at the top level for chat;
//   - legacy logprobs with k+1 entries and "token_id:N" keys under
//     return_tokens_as_token_ids; return_token_ids; choices at p*n+j; usage;
//   - the --max-logprobs cap (default 20) with vLLM's messages ("Requested prompt
//     logprobs of N, which is greater than max allowed: 20", and "sample" for
//     logprobs), max_model_len with "This model's maximum context length is …", "The
//     model `x` does not exist." as 404, max_tokens ≥ 1, non-empty prompts, and both
//     continue_final_message and add_generation_prompt set;
//   - error bodies in the nested 0.10.1+ shape, or the flat 0.8 shape with
//     [WithFlatErrors]; stop on <|im_end|> or <|endoftext|>, stop_token_ids and stop
//     strings (text cut, ids kept); the stop token is not in text unless
//     include_stop_str_in_output; stop_reason null for <|im_end|> and the id for
//     <|endoftext|> and stop_token_ids (vLLM adds generation_config's other eos ids to
//     stop_token_ids); skip_special_tokens drops only the <|…|> tokens;
//   - hermes tool-call parsing on chat completions when the request has tools (a last
//     block left unclosed counts; a block that is not JSON with name and arguments
//     leaves the whole text as content): tool_calls with "chatcmpl-tool-" ids, content
//     before the first block or null, finish_reason "tool_calls" even after a length cut.
//
// # Simplified
//
//   - generation responses carry a Content-Length, as vLLM's do, up to 4 MiB; a larger
//     one (prompt logprobs of a long prompt) is sent chunked, never held whole;
//   - no streaming (400), no echo logprobs (echo only prepends the prompt text, and
//     echo with max_tokens 0 is rejected like any max_tokens 0), no embeddings, no LoRA,
//     no API keys;
//   - n is capped at 1024;
//   - tool-call JSON numbers keep their literal text (Python would reformat floats);
//   - token_strs are decoded pieces, not raw BPE pieces ("Ġthe");
//   - validation messages other than those listed are close to vLLM's, not equal;
//   - seeded sampling does not depend on batch composition (vLLM's does, a little);
//   - the reasoning field of a chat message is "reasoning" (the newest vLLM's name),
//     null unless [WithReasoningParser] splits <think>…</think> off the content;
//   - an assistant message's reasoning_content reaches the template; vLLM versions
//     differ (older ones drop it, current ones ignore that key and read "reasoning"),
//     so only reasoning written inline in content as <think>…</think> is portable.
package vllmtest
