package jsonerr

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type poll struct {
	PollID  string    `json:"pollId"`
	Options []string  `json:"options"`
	Shards  *int      `json:"shards"`
	One     bool      `json:"oneVotePerVoter"`
	Opens   time.Time `json:"opensAt"`
	Weights []float64 `json:"weights"`
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name, body string
		want       string
	}{
		{"options a string", `{"options":"a,b"}`, `field "options": want an array of strings, got a string`},
		{"option a number", `{"options":["a",7]}`, `field "options": want a string, got a number`},
		{"shards a string", `{"shards":"8"}`, `field "shards": want a whole number, got a string`},
		{"shards a fraction", `{"shards":1.5}`, `field "shards": want a whole number, got number 1.5`},
		{"flag a string", `{"oneVotePerVoter":"yes"}`, `field "oneVotePerVoter": want true or false, got a string`},
		{"weights an object", `{"weights":{}}`, `field "weights": want an array of numbers, got an object`},
		{"time not RFC 3339", `{"opensAt":"tomorrow"}`, `"tomorrow" is not an RFC 3339 time`},
		{"an array at the top", `[1]`, `want an object, got an array`},
		{"syntax", `{"pollId":}`, `not valid JSON at byte 11`},
		{"cut short", `{"pollId":"p"`, `the JSON ends too soon`},
		{"empty", ``, `empty body`},
		{"unknown field", `{"poll":"p"}`, `unknown field "poll"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tt.body))
			dec.DisallowUnknownFields()
			var p poll
			err := dec.Decode(&p)
			if err == nil {
				t.Fatal("decoded without an error")
			}
			got := Describe(err)
			if !strings.Contains(got, tt.want) {
				t.Errorf("Describe = %q, want it to contain %q", got, tt.want)
			}
			for _, goish := range []string{"Go struct", "Go value", "[]string", "int", "poll.", "float64", "2006-01-02"} {
				if strings.Contains(got, goish) {
					t.Errorf("Describe = %q names Go's %q", got, goish)
				}
			}
		})
	}
}
