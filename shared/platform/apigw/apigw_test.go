package apigw

import (
	"net/http"
	"testing"
)

func TestJSON(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
		body   any
		want   string
		code   int
	}{
		{"no HTML escapes", http.StatusBadRequest, map[string]string{"error": "bad-key", "message": `a&b <c>`}, `{"error":"bad-key","message":"a&b <c>"}`, http.StatusBadRequest},
		{"cannot encode", http.StatusOK, map[string]any{"f": func() {}}, `{"error":"internal","message":"internal error"}`, http.StatusInternalServerError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := JSON(tt.status, tt.body)
			if got.Body != tt.want || got.StatusCode != tt.code || got.Headers["content-type"] != "application/json" {
				t.Errorf("JSON = %d %v %s, want %d %s", got.StatusCode, got.Headers, got.Body, tt.code, tt.want)
			}
		})
	}
}
