// Package jsonscan is the JSON reader under the hand-written decoders of
// atropos (groups) and vllm (prompt_logprobs and the responses that carry them). Those
// decoders walk a document and put its large parts straight into flat arrays instead of
// building nested slices and maps; this package holds the machinery they share.
//
// A [Scanner] is a document and an offset, or, made by [NewStream], a reader and a
// window on what it has read: a streaming Scanner holds the values it is reading
// rather than the document, and its methods give what they give over the same bytes
// in memory. The vllm client reads scoring answers, tens of MB of prompt_logprobs
// each, this way. The window is filled at the start of each value and of each member
// or element, never inside the small methods that read within a value, so that a
// Scanner over a document in memory costs what it did before streaming existed
// (those methods are inlined where they are called). Its methods consume one token
// or value each and never panic on any input: white space ([Scanner.WS], [Scanner.Peek]), punctuation
// ([Scanner.Consume], [Scanner.Expect]), literals ([Scanner.Null]), strings
// ([Scanner.String], [Scanner.RawString], [Scanner.Key]), numbers under JSON's grammar
// rather than strconv's ([Scanner.Number], [ValidNumber], [Scanner.Float32],
// [Scanner.Int32]), whole values ([Scanner.Skip], [Scanner.UnmarshalNext]) and
// containers ([Scanner.Object], [Scanner.Array]). [AppendInt32s] writes the lists of ids
// that [Scanner.Int32s] reads, for the request bodies that carry long prompts;
// [AppendFloat32] and [AppendFloat64] write a float as encoding/json does, byte for byte,
// in under half strconv's time, for documents that carry hundreds of thousands of
// logprobs; and the list writers [AppendInts] and [AppendFloat32s] write whole lists
// as those writers would, element by element, with room reserved once for many
// elements (the atropos encoder's token lists and distill rows). [AppendCompact] writes a
// raw value as json.Compact does, checked as strictly, for the chat messages a group
// carries.
//
// # Errors
//
// Malformed input is reported as a [*SyntaxError] with the offset where reading stopped,
// or as [ErrUnexpectedEnd] when the document ends inside a token or value. Decoders with
// an error model of their own translate these at their boundary.
//
// # Leniency
//
// [Scanner.Skip] checks the structure of what it skips, but not the escapes inside
// skipped strings (a skipped "\q" passes); decoders that promise valid JSON check the
// skipped bytes with encoding/json's Valid. Strings that are read are unquoted by
// encoding/json and so checked in full when they hold escapes; a string without escapes
// is returned as its bytes, invalid UTF-8 included (encoding/json would replace it).
package jsonscan
