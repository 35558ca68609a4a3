package refusal_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/platform/refusal"
)

var (
	errShelf = errors.New("shelf: refused")
	errTill  = errors.New("till: refused")
)

type shelfReason string

func (shelfReason) Refused() error { return errShelf }

type tillReason string

func (tillReason) Refused() error { return errTill }

func TestError(t *testing.T) {
	shelf := refusal.New(shelfReason("too-high"), "shelf %d is over %d cm", 7, 180)
	tests := []struct {
		name      string
		err       error
		wantText  string
		wantShelf shelfReason
		isShelf   bool
		isTill    bool
	}{
		{"refusal", shelf, "shelf: refused (too-high): shelf 7 is over 180 cm", "too-high", true, false},
		{"wrapped", fmt.Errorf("stock item 3: %w", shelf), "stock item 3: shelf: refused (too-high): shelf 7 is over 180 cm", "too-high", true, false},
		{"another domain's", refusal.New(tillReason("too-high"), "no"), "till: refused (too-high): no", "", false, true},
		{"not a refusal", errors.New("disk full"), "disk full", "", false, false},
		{"nil", nil, "", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err != nil && tt.err.Error() != tt.wantText {
				t.Errorf("text %q, want %q", tt.err.Error(), tt.wantText)
			}
			if got := refusal.ReasonOf[shelfReason](tt.err); got != tt.wantShelf {
				t.Errorf("ReasonOf %q, want %q", got, tt.wantShelf)
			}
			if got := errors.Is(tt.err, errShelf); got != tt.isShelf {
				t.Errorf("errors.Is(err, errShelf) = %v, want %v", got, tt.isShelf)
			}
			if got := errors.Is(tt.err, errTill); got != tt.isTill {
				t.Errorf("errors.Is(err, errTill) = %v, want %v", got, tt.isTill)
			}
			var e *refusal.Error[shelfReason]
			if got := errors.As(tt.err, &e); got != tt.isShelf {
				t.Errorf("errors.As(err, *Error[shelfReason]) = %v, want %v", got, tt.isShelf)
			}
		})
	}
}
