// Package emf writes CloudWatch metrics in the Embedded Metric Format: one
// JSON log line per flush, which CloudWatch Logs turns into metrics with no
// API call from the function.
package emf

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"
)

// Units CloudWatch accepts (the ones ddbpipe uses).
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
	Bytes        = "Bytes"
	Seconds      = "Seconds"
	None         = "None"
)

// Metric is one value.
type Metric struct {
	Name  string
	Unit  string
	Value float64
}

// Writer writes EMF lines for one namespace and set of dimensions.
type Writer struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	dims      map[string]string
	now       func() time.Time
}

// New returns a writer; dims become the metrics' dimensions (e.g. Function).
func New(w io.Writer, namespace string, dims map[string]string) *Writer {
	return &Writer{w: w, namespace: namespace, dims: dims, now: time.Now}
}

// Emit writes one EMF line holding the metrics and any extra properties
// (searchable in Logs Insights, not metrics).
func (e *Writer) Emit(metrics []Metric, props map[string]any) error {
	if len(metrics) == 0 {
		return nil
	}
	if len(metrics) > 100 {
		return fmt.Errorf("emf: %d metrics in one line, the limit is 100", len(metrics))
	}
	doc := map[string]any{}
	for k, v := range props {
		doc[k] = v
	}
	dimNames := make([]string, 0, len(e.dims))
	for k, v := range e.dims {
		doc[k] = v
		dimNames = append(dimNames, k)
	}
	sort.Strings(dimNames)
	defs := make([]map[string]string, 0, len(metrics))
	for _, m := range metrics {
		if _, clash := e.dims[m.Name]; clash || m.Name == "_aws" {
			return fmt.Errorf("emf: metric name %q clashes with a dimension", m.Name)
		}
		defs = append(defs, map[string]string{"Name": m.Name, "Unit": m.Unit})
		doc[m.Name] = m.Value
	}
	doc["_aws"] = map[string]any{
		"Timestamp": e.now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": e.namespace, "Dimensions": [][]string{dimNames}, "Metrics": defs,
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("emf: marshal: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("emf: write: %w", err)
	}
	return nil
}
