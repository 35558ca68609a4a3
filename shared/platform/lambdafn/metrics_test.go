package lambdafn

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/ddbpipe/ddbpipe/shared/platform/emf"
)

// The metrics carry the dimensions the template's alarms and dashboard
// watch: Function, and Stack when the stack name is known.
func TestNewMetricsDimensions(t *testing.T) {
	for _, tt := range []struct {
		name, stack string
		want        []string
	}{
		{"in a stack", "ddbpipe-prod", []string{"Function", "Stack"}},
		{"no stack name", "", []string{"Function"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			env := Env{Metrics: &buf, Getenv: func(k string) string {
				if k == "DDBPIPE_STACK" {
					return tt.stack
				}
				return ""
			}}
			if err := NewMetrics(env, "rotator").Emit([]emf.Metric{{Name: "TablesRetired", Unit: emf.Count, Value: 1}}, nil); err != nil {
				t.Fatal(err)
			}
			var line struct {
				AWS struct {
					CloudWatchMetrics []struct {
						Namespace  string
						Dimensions [][]string
					}
				} `json:"_aws"`
				Function, Stack string
			}
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("%v: %s", err, buf.String())
			}
			cw := line.AWS.CloudWatchMetrics
			if len(cw) != 1 || cw[0].Namespace != "ddbpipe" || len(cw[0].Dimensions) != 1 {
				t.Fatalf("metric directive %+v, want one in ddbpipe with one dimension set", cw)
			}
			got := slices.Sorted(slices.Values(cw[0].Dimensions[0]))
			if !slices.Equal(got, tt.want) || line.Function != "rotator" || line.Stack != tt.stack {
				t.Errorf("dimensions %v (Function %q, Stack %q), want %v", got, line.Function, line.Stack, tt.want)
			}
		})
	}
}
