package stack_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/search"
	"github.com/ddbpipe/ddbpipe/shared/search/searchos"
)

// searchAs is the stack's search index signed as identity.
func searchAs(t *testing.T, env *stack.Env, identity string) *searchos.Engine {
	t.Helper()
	e, err := searchos.FromAWS(env.AWSAs(identity), "", env.Vars["SEARCH_INDEX_NAME"])
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// wantSearchDenied fails unless err is OpenSearch Service's 403 naming
// action on resource.
func wantSearchDenied(t *testing.T, what string, err error, action, resource string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "status: 403") || !strings.Contains(err.Error(), `"Message"`) ||
		!strings.Contains(err.Error(), "not authorized to perform: "+action+" on resource: "+resource+" ") {
		t.Errorf("%s: %v, want a 403 naming %s on %s", what, err, action, resource)
	}
}

// TestIAMJudgesSearch: the search proxy's requests are judged as
// OpenSearch Service authorizes them (the method's es:ESHttp* action on
// the domain's ARN and the path), each identity as its role allows, and a
// denied one gets the service's 403 before it reaches the engine.
func TestIAMJudgesSearch(t *testing.T) {
	env := upJudged(t, "")
	if env.Search == nil {
		t.Skip("the servers have no search engine")
	}
	ctx := context.Background()
	alias := env.Vars["SEARCH_INDEX_NAME"]
	domain := env.Stack.Resources["SearchDomain"].Attrs["Arn"]
	if want := "arn:aws:es:us-east-1:000000000000:domain/" + env.Stack.Options.StackName + "-search"; domain != want {
		t.Fatalf("the search domain's ARN %q, want %q", domain, want)
	}
	index := alias + "-iamtest"

	indexer := searchAs(t, env, "SearchIndexerFunction")
	if err := indexer.CreateIndex(ctx, index); err != nil {
		t.Errorf("indexer creates %s: %v, want allowed", index, err)
	}
	if _, err := indexer.Bulk(ctx, index, []search.Op{{ID: "k", Version: 3, Delete: true}}); err != nil {
		t.Errorf("indexer bulk into %s: %v, want allowed", index, err)
	}
	wantSearchDenied(t, "indexer deletes an index", indexer.DeleteIndex(ctx, index), "es:ESHttpDelete", domain+"/"+index)

	api := searchAs(t, env, "ObjectsApiFunction")
	if _, err := api.Find(ctx, search.Plan{Terms: []string{"word"}, Limit: 5}); err != nil {
		t.Errorf("objects API searches %s: %v, want allowed", alias, err)
	}
	wantSearchDenied(t, "objects API creates an index", api.CreateIndex(ctx, alias+"-api"), "es:ESHttpPut", domain+"/"+alias+"-api")
	_, _, err := api.Indexes(ctx)
	wantSearchDenied(t, "objects API reads the aliases", err, "es:ESHttpGet", domain+"/_alias/"+alias)

	// An unsigned request is anonymous's, whom nothing allows.
	resp, err := http.Post(env.SearchURL+"/_bulk", "application/x-ndjson", strings.NewReader(`{"delete":{"_index":"`+index+`","_id":"k"}}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(string(body), `{"Message":"User: anonymous is not authorized to perform: es:ESHttpPost`) {
		t.Errorf("unsigned bulk: %s %s, want 403 naming anonymous", resp.Status, body)
	}

	// The admin may do anything.
	if err := searchAs(t, env, iam.Admin).DeleteIndex(ctx, index); err != nil {
		t.Errorf("admin deletes %s: %v", index, err)
	}

	got := env.Judge.Triples()
	for _, want := range []iam.Triple{
		{Identity: "SearchIndexerFunction", Action: "es:ESHttpPut", Resource: domain + "/" + index, Decision: iam.Allowed},
		{Identity: "SearchIndexerFunction", Action: "es:ESHttpPost", Resource: domain + "/_bulk", Decision: iam.Allowed},
		{Identity: "SearchIndexerFunction", Action: "es:ESHttpDelete", Resource: domain + "/" + index, Decision: iam.ImplicitlyDenied},
		{Identity: "ObjectsApiFunction", Action: "es:ESHttpPost", Resource: domain + "/" + alias + "/_search", Decision: iam.Allowed},
		{Identity: iam.Admin, Action: "es:ESHttpDelete", Resource: domain + "/" + index, Decision: iam.Allowed},
	} {
		if got[want] == 0 {
			t.Errorf("no record of %+v", want)
		}
	}
}

// TestIAMMutatedSearchGrant: remove the operator's es:ESHttpPut from a
// copy of the template, and `search reindex`'s first step (a new index)
// gets a 403 naming the action and the index's resource, while the grant
// left in place (es:ESHttpDelete) still serves.
func TestIAMMutatedSearchGrant(t *testing.T) {
	env := upJudged(t, mutate(t, "OperatorPolicy", "Action: [es:ESHttpPut, es:ESHttpDelete]", "Action: [es:ESHttpDelete]"))
	if env.Search == nil {
		t.Skip("the servers have no search engine")
	}
	ctx := context.Background()
	index := env.Vars["SEARCH_INDEX_NAME"] + "-mutated"
	domain := env.Stack.Resources["SearchDomain"].Attrs["Arn"]
	operator := searchAs(t, env, "operator")
	wantSearchDenied(t, "operator creates an index without es:ESHttpPut", operator.CreateIndex(ctx, index), "es:ESHttpPut", domain+"/"+index)
	if err := searchAs(t, env, iam.Admin).CreateIndex(ctx, index); err != nil {
		t.Fatal(err)
	}
	if err := operator.DeleteIndex(ctx, index); err != nil {
		t.Errorf("operator deletes %s with es:ESHttpDelete granted: %v", index, err)
	}
}
