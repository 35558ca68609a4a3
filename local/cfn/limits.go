package cfn

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/ddbpipe/ddbpipe/local/schedule"
)

// CheckLimits resolves every function's settings and event sources against c
// and reports each one that AWS would refuse, or that breaks the project's
// own rules (partial batch responses, dead-letter queues, visibility timeout
// at least six times the function timeout). Values that cannot be resolved
// are reported too.
func (t *Template) CheckLimits(c Context) []error {
	var errs []error
	bad := func(where, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}
	for _, f := range t.Functions() {
		where := f.LogicalID
		props, err := t.Resolve(f.Properties, c)
		if err != nil {
			bad(where, "%v", err)
			continue
		}
		p := mapOf(props)
		timeout := intOr(p["Timeout"], 3)
		if timeout < 1 || timeout > 900 {
			bad(where, "Timeout %d s is outside 1–900", timeout)
		}
		if m := intOr(p["MemorySize"], 128); m < 128 || m > 10240 {
			bad(where, "MemorySize %d MB is outside 128–10240", m)
		}
		for name, raw := range mapOf(p["Events"]) {
			ev := mapOf(raw)
			ew := where + ".Events." + name
			ep := mapOf(ev["Properties"])
			switch str(ev["Type"]) {
			case "SQS":
				errs = append(errs, t.checkSQS(ew, ep, timeout, c)...)
			case "DynamoDB":
				errs = append(errs, checkStream(ew, ep)...)
			case "Schedule":
				if _, err := schedule.Parse(scalar(ep["Schedule"])); err != nil {
					bad(ew, "%v", err)
				}
			case "HttpApi":
				if path := scalar(ep["Path"]); !strings.HasPrefix(path, "/") {
					bad(ew, "Path %q must start with /", path)
				}
				switch strings.ToUpper(scalar(ep["Method"])) {
				case "GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS", "ANY":
				default:
					bad(ew, "Method %q is not an HTTP method", ep["Method"])
				}
			case "S3":
				if scalar(ep["Bucket"]) == "" {
					bad(ew, "Bucket is missing")
				}
			default:
				bad(ew, "event type %q is not used by this project", ev["Type"])
			}
		}
	}
	return errs
}

func (t *Template) checkSQS(where string, p map[string]any, timeout int, c Context) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}
	batch := intOr(p["BatchSize"], 10)
	window := intOr(p["MaximumBatchingWindowInSeconds"], 0)
	if batch < 1 || batch > 10000 {
		bad("BatchSize %d is outside 1–10000", batch)
	}
	if window < 0 || window > 300 {
		bad("MaximumBatchingWindowInSeconds %d is outside 0–300", window)
	}
	if batch > 10 && window < 1 {
		bad("BatchSize %d above 10 needs MaximumBatchingWindowInSeconds of at least 1", batch)
	}
	if mc, ok := p["ScalingConfig"]; ok {
		if n := intOr(mapOf(mc)["MaximumConcurrency"], 0); n < 2 || n > 1000 {
			bad("ScalingConfig.MaximumConcurrency %d is outside 2–1000", n)
		}
	}
	if !hasItem(p["FunctionResponseTypes"], "ReportBatchItemFailures") {
		bad("FunctionResponseTypes must include ReportBatchItemFailures (partial batch responses)")
	}
	// Find the queue by its ARN to check its visibility timeout and redrive.
	queue := ""
	if m, ok := t.unresolved(where, "Queue"); ok {
		for _, r := range Refs(m) {
			if res, ok := t.Resources[r.Target]; ok && res.Type == TypeQueue {
				queue = r.Target
			}
		}
	}
	if queue == "" {
		bad("Queue must be a queue of this template")
		return errs
	}
	qp, err := t.Resolve(t.Resources[queue].Properties, c)
	if err != nil {
		bad("queue %s: %v", queue, err)
		return errs
	}
	q := mapOf(qp)
	if vt := intOr(q["VisibilityTimeout"], 30); vt < 6*timeout {
		bad("queue %s VisibilityTimeout %d s is below 6 × the function timeout (%d s)", queue, vt, 6*timeout)
	}
	if len(mapOf(q["RedrivePolicy"])) == 0 {
		bad("queue %s has no RedrivePolicy (dead-letter queue)", queue)
	}
	return errs
}

// unresolved returns an event property before resolution, for reference checks.
func (t *Template) unresolved(where, prop string) (any, bool) {
	fn, _, _ := strings.Cut(where, ".")
	_, event, _ := strings.Cut(where, ".Events.")
	r, ok := t.Resources[fn]
	if !ok {
		return nil, false
	}
	ev := mapOf(mapOf(mapOf(r.Properties["Events"])[event])["Properties"])
	v, ok := ev[prop]
	return v, ok
}

func checkStream(where string, p map[string]any) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{where}, args...)...))
	}
	if sp := scalar(p["StartingPosition"]); sp != "TRIM_HORIZON" && sp != "LATEST" {
		bad("StartingPosition %q must be TRIM_HORIZON or LATEST", sp)
	}
	if b := intOr(p["BatchSize"], 100); b < 1 || b > 10000 {
		bad("BatchSize %d is outside 1–10000", b)
	}
	if w := intOr(p["MaximumBatchingWindowInSeconds"], 0); w < 0 || w > 300 {
		bad("MaximumBatchingWindowInSeconds %d is outside 0–300", w)
	}
	if r := intOr(p["MaximumRetryAttempts"], -1); r < -1 || r > 10000 {
		bad("MaximumRetryAttempts %d is outside -1–10000", r)
	}
	if a := intOr(p["MaximumRecordAgeInSeconds"], -1); a != -1 && (a < 60 || a > 604800) {
		bad("MaximumRecordAgeInSeconds %d must be -1 or within 60–604800", a)
	}
	if f := intOr(p["ParallelizationFactor"], 1); f < 1 || f > 10 {
		bad("ParallelizationFactor %d is outside 1–10", f)
	}
	if !hasItem(p["FunctionResponseTypes"], "ReportBatchItemFailures") {
		bad("FunctionResponseTypes must include ReportBatchItemFailures (checkpoint at the failed sequence number)")
	}
	if scalar(mapOf(mapOf(p["DestinationConfig"])["OnFailure"])["Destination"]) == "" {
		bad("DestinationConfig.OnFailure.Destination is missing: a failing batch would be dropped silently")
	}
	patterns := FilterPatterns(p)
	if len(patterns) > 5 {
		bad("FilterCriteria has %d filters; at most 5", len(patterns))
	}
	for i, pat := range patterns {
		var v map[string]any
		if len(pat) > 4096 {
			bad("FilterCriteria filter %d is %d characters; at most 4096", i+1, len(pat))
		} else if json.Unmarshal([]byte(pat), &v) != nil || len(v) == 0 {
			bad("FilterCriteria filter %d's Pattern is not a JSON object: %q", i+1, pat)
		}
	}
	return errs
}

// FilterPatterns lists an event source's FilterCriteria patterns (a
// pattern given as YAML rather than a JSON string is written as JSON).
func FilterPatterns(p map[string]any) []string {
	filters, _ := mapOf(p["FilterCriteria"])["Filters"].([]any)
	var out []string
	for _, f := range filters {
		pat := mapOf(f)["Pattern"]
		if s, ok := pat.(string); ok {
			out = append(out, s)
			continue
		}
		b, _ := json.Marshal(pat)
		out = append(out, string(b))
	}
	return out
}

func intOr(v any, def int) int {
	if v == nil {
		return def
	}
	n, err := strconv.Atoi(scalar(v))
	if err != nil {
		return def
	}
	return n
}

func hasItem(v any, s string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if scalar(x) == s {
			return true
		}
	}
	return false
}
