package searchproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is every error the proxy answers itself, in OpenSearch's shape:
//
//	{"error":{"root_cause":[{"type":…,"reason":…}],"type":…,"reason":…},"status":N}
type apiError struct {
	Status int
	Type   string
	Reason string
	Index  string // the index concerned, "" when none
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Reason) }

func errorf(status int, typ, format string, args ...any) *apiError {
	return &apiError{Status: status, Type: typ, Reason: fmt.Sprintf(format, args...)}
}

// cause is the error object of a response or of a bulk item.
type cause struct {
	Type      string  `json:"type"`
	Reason    string  `json:"reason"`
	Index     string  `json:"index,omitempty"`
	Shard     string  `json:"shard,omitempty"`
	IndexUUID string  `json:"index_uuid,omitempty"`
	RootCause []cause `json:"root_cause,omitempty"`
}

func (e *apiError) cause() cause {
	c := cause{Type: e.Type, Reason: e.Reason, Index: e.Index}
	if e.Index != "" {
		c.Shard, c.IndexUUID = "0", indexUUID(e.Index)
	}
	return c
}

// indexUUID stands in for an index's UUID: stable for a name.
func indexUUID(index string) string { return "local-" + index }

func writeError(w http.ResponseWriter, e *apiError) {
	c := e.cause()
	root := c
	c.RootCause = []cause{root}
	writeJSON(w, e.Status, struct {
		Error  cause `json:"error"`
		Status int   `json:"status"`
	}{c, e.Status})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"type":"exception","reason":"encode response"},"status":500}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
