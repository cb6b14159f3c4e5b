package nemogym

import (
	"encoding/json"
)

// Item is one Responses-API item of a rollout's output: an assistant "message", a
// "reasoning" item, a "function_call" or a "function_call_output". Only the fields of
// its Type are set. The last item of each model call carries the call's [TokenInfo],
// and, when the teacher scored the rollout, its [TeacherRows].
type Item struct {
	Type   string `json:"type"`
	ID     string `json:"id,omitempty"`
	Role   string `json:"role,omitempty"`
	Status string `json:"status,omitempty"`
	// Content is a message's parts.
	Content []ContentPart `json:"content,omitempty"`
	// Summary is a reasoning item's summary (required on reasoning items).
	Summary []SummaryPart `json:"summary,omitempty"`
	// CallID, Name and Arguments are a function call's; CallID and Output a
	// function call output's.
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"`

	*TokenInfo
	*TeacherRows
}

// ContentPart is one part of a message: {"type":"output_text","text",…}.
type ContentPart struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

// SummaryPart is one part of a reasoning item's summary.
type SummaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// TokenInfo is what one model call saw and produced, on the last item of the call:
// the three keys NeMo RL trains on. They come together or not at all.
type TokenInfo struct {
	// PromptTokenIDs is the exact prompt the engine consumed.
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	// GenerationTokenIDs is every token sampled in the call, the end-of-turn token
	// included.
	GenerationTokenIDs []int32 `json:"generation_token_ids"`
	// GenerationLogProbs is the sampling logprob of each generated token, floored at
	// [LogprobFloor].
	GenerationLogProbs []float32 `json:"generation_log_probs"`
}

// TeacherRows are the teacher's top-K rows for the generated tokens of one model call,
// an extension this library adds beside [TokenInfo]: one row per entry of
// generation_token_ids, same order, ranked ids and their logprobs, most likely first;
// an empty row where the teacher was not asked (a turn without a hint). Trainers that
// do not know the keys ignore them.
type TeacherRows struct {
	// TokenIDs[i] are the teacher's top-K ids at generated token i.
	TokenIDs [][]int32 `json:"teacher_topk_token_ids"`
	// Logprobs[i] are their teacher logprobs, finite.
	Logprobs [][]float32 `json:"teacher_topk_logprobs"`
}

// LogprobFloor is the value NeMo RL's server gives a logprob of −∞; JSON has no
// infinity, and orjson rejects one.
const LogprobFloor = -9999.0

// Response is the Responses-API response object of a rollout: its Output holds the
// items the rollout produced, not the initial input.
type Response struct {
	ID                string             `json:"id"`
	CreatedAt         float64            `json:"created_at"`
	Model             string             `json:"model"`
	Object            string             `json:"object"`
	Output            []Item             `json:"output"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	ToolChoice        json.RawMessage    `json:"tool_choice"`
	Tools             []json.RawMessage  `json:"tools"`
	IncompleteDetails *IncompleteDetails `json:"incomplete_details"`
	Status            string             `json:"status"`
	Usage             *Usage             `json:"usage,omitempty"`
}

// IncompleteDetails says why a response stopped early.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Usage is a response's token usage; every key is present when it is.
type Usage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// Result is the answer to one POST /run, the verify-response shape: the row's keys
// (without the reserved result keys), the response, the reward and its parts, and,
// for a failed rollout answered as a row, the failure keys.
//
// The row's "task" is echoed without what the agent is never shown:
// "hidden_tests", "cases" (the graded input/output cases), "reference_solution" and
// every key that begins with "hidden_" (a dataset's own hidden material), so that
// the tests that grade a rollout do not travel into a trainer's result tables, its
// logs or the rollouts files. A rollouts line fed back as a row therefore runs its
// task without them: send the dataset rows, not the answers.
type Result struct {
	// Row holds the request row's other keys, echoed (task fields, indices,
	// agent_ref); the task's hidden keys are left out when it is written.
	Row map[string]json.RawMessage
	// ResponsesCreateParams echoes the request's params.
	ResponsesCreateParams json.RawMessage
	// Response is the rollout's response; nil on a failure row.
	Response *Response
	// Reward is the scalar reward.
	Reward float64
	// RewardComponents are the weighted parts of Reward; their plain sum is Reward.
	RewardComponents map[string]float64
	// FailureClass, Error and Terminal are set on a failure row only.
	FailureClass string
	Error        string
	Terminal     bool
}

// Result keys this package writes, and the keys removed from an echoed row.
var reservedKeys = []string{"reward", "reward_components", "response", "error",
	"_ng_failure_class", "_ng_no_persist", "_ng_failure_terminal", "responses_create_params"}
