package votes

import (
	"fmt"
	"testing"
)

func TestAudit(t *testing.T) {
	tests := []struct {
		name     string
		counted  []Totals
		archived map[string]map[string]int64
		want     string
		differ   int
	}{
		{"agree", []Totals{{PollID: "p", Totals: map[string]int64{"a": 2, "b": 1}}},
			map[string]map[string]int64{"p": {"a": 2, "b": 1}}, "[{p a 2 2} {p b 1 1}]", 0},
		{"a count the archive lacks", []Totals{{PollID: "p", Totals: map[string]int64{"a": 3}}},
			map[string]map[string]int64{"p": {"a": 2}}, "[{p a 3 2}]", 1},
		{"an option only the archive has", []Totals{{PollID: "p", Totals: map[string]int64{"a": 1}}},
			map[string]map[string]int64{"p": {"a": 1, "z": 4}}, "[{p a 1 1} {p z 0 4}]", 1},
		{"a poll with nothing archived", []Totals{{PollID: "q", Totals: map[string]int64{"a": 1}}, {PollID: "p", Totals: map[string]int64{}}},
			map[string]map[string]int64{}, "[{q a 1 0}]", 1},
		{"other polls of the archive are not compared", []Totals{{PollID: "p", Totals: map[string]int64{"a": 1}}},
			map[string]map[string]int64{"p": {"a": 1}, "other": {"x": 9}}, "[{p a 1 1}]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, differ := Audit(tt.counted, tt.archived)
			if got := fmt.Sprint(lines); got != tt.want || differ != tt.differ {
				t.Errorf("Audit = %s, %d differ; want %s, %d", got, differ, tt.want, tt.differ)
			}
		})
	}
}
