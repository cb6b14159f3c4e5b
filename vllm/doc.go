// Package vllm is a client for vLLM's OpenAI-compatible HTTP server that is exact
// about token ids and logprobs, as reinforcement learning and on-policy distillation
// need.
//
// [NewClient] returns a [Client] for one server; [NewPool] spreads calls over several.
// Both implement the library's roles: [rollout.Policy] (chat template rendering with
// POST /tokenize, generation from token ids with POST /v1/completions),
// [scorer.LogprobScorer] (teacher top-K with prompt_logprobs) and [judge.ChatModel]
// (POST /v1/chat/completions with n). The lower-level calls ([Client.Models],
// [Client.Health], [Client.Version], [Client.Tokenize], [Client.Detokenize],
// [Client.Completions], [Client.ChatCompletions]) are exported as well.
//
// # Ids, never strings
//
// Prompts are sent as token ids, so the server adds no BOS and does not re-tokenise.
// Generated ids come from "token_ids" (vLLM 0.10.2+ with return_token_ids) or, on older
// servers, from the "token_id:N" strings that return_tokens_as_token_ids produces.
// Token strings (decoded_token, the keys of top_logprobs) are never used to identify a
// token: decoded_token is not even kept.
//
// # prompt_logprobs
//
// vLLM answers prompt_logprobs=K with one element per prompt token: null at position 0,
// then an object keyed by token-id strings whose values carry logprob, rank and
// decoded_token, holding the top-K plus the actual prompt token when it ranks below K
// (K or K+1 entries). [PromptLogprobs] holds this in flat arrays with offsets, decoded
// by a scanner without a map or string per position: a 16k-token prompt at K=50 is
// tens of megabytes of JSON (see BenchmarkDecodePromptLogprobs). Top-K order comes
// from the ranks, never from key order. vLLM writes −∞ as -9999; it is kept as that
// finite value ([NegInfLogprob]) because Atropos refuses non-finite numbers.
//
// With a batch of P prompts and n samples each, choice p*n+j is sample j of prompt p
// ([CompletionResponse.ChoicesOf]). Chat completions carry prompt_logprobs and
// prompt_token_ids once, at the top level of the answer
// ([ChatCompletionResponse.PromptLogprobs], [ChatCompletionResponse.PromptTokenIDs]),
// decoded the same way.
//
// # Sampling
//
// Every generation request states every sampling field: temperature, top_p, top_k
// (-1 when off), min_p, repetition_penalty, presence_penalty, frequency_penalty, and
// max_tokens. vLLM's default --generation-config auto fills each field a request leaves
// out from the model's generation_config.json (Qwen3: temperature 0.6, top_k 20,
// top_p 0.95) while it reports raw logprobs (--logprobs-mode raw_logprobs), so a field
// left out would make the reported logprobs those of another distribution than the one
// sampled. Generate sends the request's [sampling.Params] resolved; Chat sends the
// judge's; Score sends [ScoreSampling]. Chat reads a message's reasoning from
// "reasoning" (newest vLLM) or "reasoning_content" (older), never into the content.
//
// # Teacher scoring
//
// [Client.Score] sends the sequences of a [scorer.Request] in one /v1/completions
// request (prompt as a list of id lists, prompt_logprobs=K, max_tokens=1, n=1,
// temperature 1), split into several when they exceed [WithScoreBatch]'s bounds. The
// entry keyed by the token actually at a scored position must be there: that is how
// the reply's alignment with the sequence is checked, by id. Measured on a shared
// 2-core machine, decoding a 16384 × 51 answer (54 MB) takes about a sixth of the
// time encoding/json needs to decode it into maps.
//
// A scoring answer is read as it arrives ([DecodeCompletionStream]): the client holds
// a window of 64 KiB on the body and the arrays it decodes into (about a fifth of the
// body's size), never the body itself, whether or not the server states its length. A
// body that breaks off in the middle is a failed attempt, as for any other request
// (see # Pool); the other answers are small and read whole.
//
// # Pool
//
// [Pool] sends each call to the healthy server with the fewest calls in flight, moves
// on to one other server when one fails (a connection error, a broken answer, an
// attempt past its timeout, or a 5xx), and takes a failed server back once GET /health
// answers again. The rule for retries across servers: a call reaches at most
// [MaxServersPerCall] (2) servers, the first and one other; it is never replayed on
// every server, so a request that crashes engines (an oversized scoring batch, say)
// cannot take down the pool. Within one server, go-retryablehttp retries as below. Close stops its health checker and closes its idle connections. [Pool.Score] spreads the parts of a
// split request over the servers.
//
// # Errors
//
// A non-2xx answer is an *[APIError], whatever shape the body has (vLLM's flat and
// nested bodies, {"error":"text"}, FastAPI's detail, plain text); errors are wrapped
// with the operation, as in "vllm: POST /v1/completions: 400 Bad Request …". Callers
// branch with errors.Is on [ErrMaxLogprobs] (the *[MaxLogprobsError] carries the
// server's cap and says to start vLLM with --max-logprobs ≥ K or to lower
// Config.DistillTopK), [ErrContextLength] and [ErrModelNotFound]. A 404 counts as
// [ErrModelNotFound] when it is vLLM's NotFoundError or speaks of a model; FastAPI's
// bare {"detail":"Not Found"} for an unknown route does not. [CheckTopK] finds a
// teacher whose --max-logprobs is below the top-K at start-up, with one request.
//
// # Timeouts and connections
//
// Each attempt is bounded per role ([Timeouts]): small requests 30 s; a generation
// 60 s + 100 ms × max_tokens; a scoring request 60 s + 2 ms × prompt tokens. The
// response headers must come within that limit (vLLM sends them only when a
// non-streaming answer is done) and the whole attempt within twice it. An attempt past
// its limit is an *[AttemptTimeoutError], is not retried on the same server, and makes
// a [Pool] mark the server failed: a hung server is noticed within one limit. The
// client's own transport keeps [DefaultIdleConnsPerServer] idle connections per server
// ([WithIdleConns]), so 64 rollouts in flight reuse their connections instead of
// opening new ones (Go's default keeps 2).
//
// # Retries
//
// Requests go through hashicorp/go-retryablehttp: connection errors, 429 and 5xx
// (except 501) are retried with exponential backoff (honouring Retry-After), 4xx
// never. The ctx of a call bounds all attempts together; [WithAttemptTimeout] bounds
// each one. The last answer's body is decoded into the error. [Client.Health] makes a
// single attempt.
//
// # Model name
//
// Requests carry a model name: the one given with [WithModel], or else the first model
// of GET /v1/models, asked on first need and remembered.
//
// The client never logs unless given a logger with [WithLogger] and never reads the
// environment.
package vllm
