// Package refusal is how a domain refuses a request: a reason, a stable
// code that a client may branch on (an API's error body, a reject's
// reason in the rejects queue), and a detail that may be shown to whoever
// made the request (it never holds internal state).
//
// Each domain declares its own reason type, its reasons and its sentinel
// (objects.ErrInvalid, search.ErrInvalid, votes.ErrRejected); Error is the
// one error type they share. An *Error[objects.Reason] is not an
// *Error[search.Reason], so errors.As finds only the domain's own refusals,
// and errors.Is(err, sentinel) matches every refusal of that domain.
package refusal

import (
	"errors"
	"fmt"
)

// Reason is a domain's reason type: a string whose values are stable.
type Reason interface {
	~string
	// Refused is the domain's sentinel: errors.Is(err, r.Refused()) holds
	// for each of the domain's refusals, and its text begins their text
	// ("votes: rejected").
	Refused() error
}

// Error is a refused request: its reason and its detail.
type Error[R Reason] struct {
	Reason R
	Detail string
}

// Error reads "<sentinel> (<reason>): <detail>", as in
// "votes: rejected (poll-closed): poll p1 closed at 2026-11-01T00:00:00Z".
func (e *Error[R]) Error() string {
	return fmt.Sprintf("%v (%s): %s", e.Reason.Refused(), e.Reason, e.Detail)
}

// Is makes errors.Is(err, sentinel) true for the domain's sentinel.
func (e *Error[R]) Is(target error) bool { return target == e.Reason.Refused() }

// New is the refusal for reason r, with its detail formatted.
func New[R Reason](r R, format string, args ...any) *Error[R] {
	return &Error[R]{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf returns the reason of the first *Error[R] in err's chain, or ""
// when there is none.
func ReasonOf[R Reason](err error) R {
	var e *Error[R]
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
