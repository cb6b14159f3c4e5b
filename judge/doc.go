// Package judge finds hindsight hints: for an assistant turn and the state that followed
// it, a Judge says whether the next state shows how the turn could have been better and,
// if so, gives a short hint.
package judge
