package vllm

import (
	"math"
	"strconv"
)

// The fast path of the prompt_logprobs decoder. vLLM writes every position the same
// way, compact, with the entries' keys in one order:
//
//	{"<id>":{"logprob":<number>,"rank":<integer>,"decoded_token":"<string>"},…}
//
// (rank and decoded_token may also be null, and decoded_token absent). fastPosition
// reads a position written so in one pass over its bytes, without the scanner's calls;
// anything else (white space, other keys or another order, an id with escapes or of
// ten digits and more, a malformed value) makes it give up, and decodePosition reads
// the position again from its start with the general path, which accepts what it
// accepts and reports what it reports. So the fast path accepts only what the general
// path accepts, with the same result, and never reports an error of its own.

// fastPosition reads the position object that starts at d[i] (its '{') into p and
// returns the offset just after it; ok is false, and p is as it was, when the
// position is not written the way fastPosition reads (or is malformed, or, in a
// streaming scanner's window, not in d whole).
func fastPosition(d []byte, i int, p *PromptLogprobs) (end int, ok bool) {
	if i >= len(d) || d[i] != '{' {
		return 0, false
	}
	i++
	if i < len(d) && d[i] == '}' {
		return i + 1, true
	}
	start := len(p.IDs)
	ids, lps, ranks := p.IDs, p.Logprobs, p.Ranks
	for {
		// "<id>":
		if i >= len(d) || d[i] != '"' {
			break
		}
		i++
		var id int32
		j := i
		for j < len(d) && j-i < 9 {
			c := d[j] - '0'
			if c > 9 {
				break
			}
			id = id*10 + int32(c)
			j++
		}
		if j == i || len(d)-j < 2 || d[j] != '"' || d[j+1] != ':' {
			break // no digits, ten or more, or not the expected bytes after them
		}
		lp, rank, j, ok := fastEntry(d, j+2)
		if !ok {
			break
		}
		i = j
		if len(ids) == cap(ids) {
			p.IDs, p.Logprobs, p.Ranks = ids, lps, ranks
			p.grow()
			ids, lps, ranks = p.IDs, p.Logprobs, p.Ranks
		}
		ids = append(ids, id)
		lps = append(lps, lp)
		ranks = append(ranks, rank)
		if i >= len(d) {
			break
		}
		if d[i] == ',' {
			i++
			continue
		}
		if d[i] != '}' || len(ids) > 1<<31-2 { // the general path says "too many entries"
			break
		}
		p.IDs, p.Logprobs, p.Ranks = ids, lps, ranks
		return i + 1, true
	}
	p.IDs, p.Logprobs, p.Ranks = p.IDs[:start], p.Logprobs[:start], p.Ranks[:start]
	return 0, false
}

// fastEntry reads the entry object that starts at d[i] (its '{') when it is written
// {"logprob":<number>,"rank":<integer>|null[,"decoded_token":<string>|null]}, and
// returns the offset just after it; ok is false for anything else. It accepts what
// decodeEntry accepts, with the same result.
func fastEntry(d []byte, i int) (lp float32, rank int32, end int, ok bool) {
	if len(d)-i < len(`{"logprob":`) || string(d[i:i+len(`{"logprob":`)]) != `{"logprob":` {
		return 0, 0, 0, false
	}
	lp, i, ok = fastLogprob(d, i+len(`{"logprob":`))
	if !ok {
		return 0, 0, 0, false
	}
	// ,"rank":<integer>|null
	if len(d)-i < len(`,"rank":`) || string(d[i:i+len(`,"rank":`)]) != `,"rank":` {
		return 0, 0, 0, false
	}
	i += len(`,"rank":`)
	if i < len(d) && d[i] >= '1' && d[i] <= '9' {
		j := i
		for j < len(d) && j-i < 9 {
			c := d[j] - '0'
			if c > 9 {
				break
			}
			rank = rank*10 + int32(c)
			j++
		}
		i = j
	} else if len(d)-i >= 4 && string(d[i:i+4]) == "null" {
		i += 4
	} else {
		return 0, 0, 0, false // a zero rank, a negative one, or not an integer
	}
	// [,"decoded_token":<string>|null]}
	if i < len(d) && d[i] == ',' {
		if len(d)-i < len(`,"decoded_token":`) || string(d[i:i+len(`,"decoded_token":`)]) != `,"decoded_token":` {
			return 0, 0, 0, false
		}
		i += len(`,"decoded_token":`)
		if j, ok := skipPlainString(d, i); ok {
			i = j
		} else if len(d)-i >= 4 && string(d[i:i+4]) == "null" {
			i += 4
		} else {
			return 0, 0, 0, false
		}
	}
	if i >= len(d) || d[i] != '}' {
		return 0, 0, 0, false // also a rank of ten digits or more, or one followed by anything else
	}
	return lp, rank, i + 1, true
}

// skipPlainString returns the offset after the string that starts at d[i] (its
// opening quote), as jsonscan's Skip reads a string: a backslash takes the byte after
// it with it, escapes are not checked, and control characters are refused. ok is
// false when d[i] is not a quote, the string does not end within d, or it holds a
// control character.
func skipPlainString(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return 0, false
	}
	for i++; i < len(d); {
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i += 2
		case c < 0x20:
			return 0, false
		default:
			i++
		}
	}
	return 0, false
}

// float64pow10 holds the powers of ten that float64 represents exactly.
var float64pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// fastLogprob reads the number at d[i] as jsonscan's Float32 does: JSON's grammar,
// then the float32 nearest to its decimal value, which must be finite. ok is false
// when d[i:] does not start with a number, when the number is not a finite float32,
// and when the number runs to the end of d (in a streaming window it may go on).
//
// The conversion is exact without strconv for the numbers servers write (shortest
// float32 formatting: at most nine significant digits, small exponents): when the
// digits m fit 53 bits and the decimal exponent e is at most 22 in magnitude,
// float64(m) and 10^|e| are exact, so their product or quotient is the float64
// nearest to the value. Rounding that to float32 rounds the value itself the same
// way unless the float64 lies exactly halfway between two float32s (the value may
// then be on either side): those, and every other number, go to strconv.
func fastLogprob(d []byte, i int) (f float32, end int, ok bool) {
	start := i
	neg := i < len(d) && d[i] == '-'
	if neg {
		i++
	}
	var m uint64
	exp := 0
	exact := true // m holds every digit
	if i < len(d) && d[i] == '0' {
		i++
	} else if i < len(d) && d[i] >= '1' && d[i] <= '9' {
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
			if m < 1<<59 {
				m = m*10 + uint64(d[i]-'0')
			} else {
				exact = false
			}
		}
	} else {
		return 0, 0, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
			if m < 1<<59 {
				m = m*10 + uint64(d[i]-'0')
				exp--
			} else {
				exact = false
			}
		}
		if i == j {
			return 0, 0, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		eneg := false
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			eneg = d[i] == '-'
			i++
		}
		j := i
		e := 0
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
			if e < 10000 {
				e = e*10 + int(d[i]-'0')
			} else {
				exact = false
			}
		}
		if i == j {
			return 0, 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i >= len(d) {
		return 0, 0, false
	}
	if exact && m <= 1<<53 && exp >= -22 && exp <= 22 {
		x := float64(m)
		if exp < 0 {
			x /= float64pow10[-exp]
		} else {
			x *= float64pow10[exp]
		}
		// x ≤ 2^53 × 10^22 < MaxFloat32, and x ≥ 10^-22 unless 0: a normal float32
		// when rounded. The 29 bits float32 drops from float64's 52-bit fraction are
		// exactly one half of its last place only at a midpoint.
		if math.Float64bits(x)&(1<<29-1) != 1<<28 {
			if neg {
				x = -x
			}
			return float32(x), i, true
		}
	}
	x, err := strconv.ParseFloat(string(d[start:i]), 32)
	if err != nil || math.IsInf(x, 0) {
		return 0, 0, false
	}
	return float32(x), i, true
}
