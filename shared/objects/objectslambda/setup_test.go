package objectslambda_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ddbpipe/ddbpipe/shared/objects/objectslambda"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn"
	"github.com/ddbpipe/ddbpipe/shared/platform/lambdafn/lambdafntest"
)

// Each Setup refuses a missing or out-of-range variable with an error that
// names every bad one, and builds its handler from a valid environment
// without calling AWS.
func TestSetups(t *testing.T) {
	shared := map[string]string{"OBJECTS_TABLE": "objects", "OBJECTS_BUCKET": "objects-bucket", "INLINE_MAX_BYTES": "40960", "MAX_VERSIONS": "10"}
	maint := map[string]string{"OBJECTS_TABLE": "objects", "OBJECTS_BUCKET": "objects-bucket", "ORPHAN_GRACE_MINUTES": "60"}
	apiHandler := func(h any) bool {
		_, ok := h.(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error))
		return ok
	}
	tests := []struct {
		name    string
		setup   lambdafn.Setup
		vars    map[string]string
		wantErr []string // every variable the error must name; none: a handler
		handler func(any) bool
	}{
		{name: "api", setup: objectslambda.SetupAPI, vars: shared, handler: apiHandler},
		{name: "api with every option", setup: objectslambda.SetupAPI, handler: apiHandler, vars: lambdafntest.With(shared, map[string]string{
			"MAX_BODY_BYTES": "4194304", "MAX_RESPONSE_BYTES": "1048576", "DOWNLOAD_TTL_SECONDS": "300", "UPLOAD_TTL_SECONDS": "900", "MAX_OBJECT_BYTES": "5368709120",
		})},
		{name: "api with nothing", setup: objectslambda.SetupAPI, vars: nil,
			wantErr: []string{"OBJECTS_TABLE", "OBJECTS_BUCKET", "INLINE_MAX_BYTES", "MAX_VERSIONS"}},
		{name: "api out of range", setup: objectslambda.SetupAPI, vars: lambdafntest.With(shared, map[string]string{
			"INLINE_MAX_BYTES": "-1", "MAX_VERSIONS": "1001", "MAX_BODY_BYTES": "99999999", "MAX_RESPONSE_BYTES": "x",
			"DOWNLOAD_TTL_SECONDS": "0", "UPLOAD_TTL_SECONDS": "59", "MAX_OBJECT_BYTES": "0",
		}), wantErr: []string{"INLINE_MAX_BYTES", "MAX_VERSIONS", "MAX_BODY_BYTES", "MAX_RESPONSE_BYTES", "DOWNLOAD_TTL_SECONDS", "UPLOAD_TTL_SECONDS", "MAX_OBJECT_BYTES"}},
		{name: "api without a table", setup: objectslambda.SetupAPI, vars: lambdafntest.With(shared, map[string]string{"OBJECTS_TABLE": ""}), wantErr: []string{"OBJECTS_TABLE"}},

		{name: "finalize", setup: objectslambda.SetupFinalize, vars: shared, handler: func(h any) bool {
			_, ok := h.(func(context.Context, events.S3Event) error)
			return ok
		}},
		{name: "finalize with nothing", setup: objectslambda.SetupFinalize, vars: nil,
			wantErr: []string{"OBJECTS_TABLE", "OBJECTS_BUCKET", "INLINE_MAX_BYTES", "MAX_VERSIONS"}},
		{name: "finalize out of range", setup: objectslambda.SetupFinalize, vars: lambdafntest.With(shared, map[string]string{"MAX_VERSIONS": "0", "INLINE_MAX_BYTES": "358401", "MAX_OBJECT_BYTES": "6000000000"}),
			wantErr: []string{"MAX_VERSIONS", "INLINE_MAX_BYTES", "MAX_OBJECT_BYTES"}},

		{name: "reaper", setup: objectslambda.SetupReaper, vars: maint, handler: func(h any) bool {
			_, ok := h.(func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error))
			return ok
		}},
		{name: "reaper with nothing", setup: objectslambda.SetupReaper, vars: nil, wantErr: []string{"OBJECTS_TABLE", "OBJECTS_BUCKET"}},

		{name: "sweeper", setup: objectslambda.SetupSweeper, vars: maint, handler: func(h any) bool {
			_, ok := h.(func(context.Context, events.EventBridgeEvent) error)
			return ok
		}},
		{name: "sweeper with nothing", setup: objectslambda.SetupSweeper, vars: nil, wantErr: []string{"OBJECTS_TABLE", "OBJECTS_BUCKET", "ORPHAN_GRACE_MINUTES"}},
		{name: "sweeper grace out of range", setup: objectslambda.SetupSweeper, vars: lambdafntest.With(maint, map[string]string{"ORPHAN_GRACE_MINUTES": "0"}), wantErr: []string{"ORPHAN_GRACE_MINUTES"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, _ := lambdafntest.Env(t, tt.vars)
			h, err := tt.setup(context.Background(), env)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("setup: %v", err)
				}
				if h == nil || !tt.handler(h) {
					t.Fatalf("handler %T, want the function's handler", h)
				}
				return
			}
			if err == nil {
				t.Fatalf("setup succeeded (handler %T), want an error naming %v", h, tt.wantErr)
			}
			for _, name := range tt.wantErr {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name %s", err, name)
				}
			}
		})
	}
}

// The API searches only when the template gives it a search endpoint and
// an index: with SearchEnabled=false both are empty, and a search is 503
// search-disabled, whatever the environment's OpenSearch endpoint says.
func TestAPISearchFollowsTheTemplate(t *testing.T) {
	shared := map[string]string{"OBJECTS_TABLE": "objects", "OBJECTS_BUCKET": "objects-bucket", "INLINE_MAX_BYTES": "40960", "MAX_VERSIONS": "10"}
	for name, tc := range map[string]struct {
		vars     map[string]string
		disabled bool
	}{
		"search off":            {lambdafntest.With(shared, map[string]string{"SEARCH_INDEX": "s-objects", "AWS_ENDPOINT_URL_OPENSEARCH": "http://127.0.0.1:1"}), true},
		"no index":              {lambdafntest.With(shared, map[string]string{"SEARCH_ENDPOINT": "search.example"}), true},
		"endpoint and an index": {lambdafntest.With(shared, map[string]string{"SEARCH_ENDPOINT": "search.example", "SEARCH_INDEX": "s-objects"}), false},
	} {
		t.Run(name, func(t *testing.T) {
			env, _ := lambdafntest.Env(t, tc.vars)
			h, err := objectslambda.SetupAPI(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.disabled {
				return // searching would call the engine: the stack tests do
			}
			req := events.APIGatewayV2HTTPRequest{RouteKey: "GET /objects", QueryStringParameters: map[string]string{"search": "x"}}
			req.RequestContext.HTTP.Method = "GET"
			resp, err := h.(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error))(context.Background(), req)
			if err != nil || resp.StatusCode != 503 || !strings.Contains(resp.Body, "search-disabled") {
				t.Errorf("search: %d %s, %v; want 503 search-disabled", resp.StatusCode, resp.Body, err)
			}
		})
	}
}
