package iam_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/servers"
)

// startEvaluator starts the real evaluator (node, @cloud-copilot/
// iam-simulate); it skips without node or the judge's npm packages, and
// fails instead under DDBPIPE_REQUIRE_STACK=1 (make test installs them).
func startEvaluator(t *testing.T) *iam.Evaluator {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := iam.StartEvaluator(t.Context(), "", servers.IAMJudgeDir(root), os.Stderr)
	if err != nil {
		if os.Getenv("DDBPIPE_REQUIRE_STACK") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() { _ = ev.Close() })
	return ev
}

// allowing is policies under which the identity "fn" may call action on
// arn:aws:dynamodb:us-east-1:000000000000:table/T and nothing else.
func allowing(action string) *iam.Policies {
	doc, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Action": action, "Resource": "arn:aws:dynamodb:us-east-1:000000000000:table/T",
	}}})
	return &iam.Policies{Identities: map[string]iam.IdentityPolicies{"fn": {
		Role: "FnRole", Principal: "arn:aws:iam::000000000000:role/fn", Policies: []iam.NamedPolicy{{Name: "p", Policy: doc}},
	}}}
}

// Judges that share one evaluator each judge by their own policies, at
// once, and a judge that closes takes its policies with it and leaves the
// evaluator to the others.
func TestJudgesShareAnEvaluator(t *testing.T) {
	ev := startEvaluator(t)
	const admin = "AKIDADMIN"
	place := iam.Place{Region: "us-east-1", AccountID: "000000000000"}
	start := func(action string) *iam.Judge {
		j, err := iam.Start(t.Context(), iam.Config{Place: place, Policies: allowing(action), AdminKey: admin, Evaluator: ev.URL})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	puts, gets := start("dynamodb:PutItem"), start("dynamodb:GetItem")
	defer gets.Close()
	key := iam.AccessKeyID(admin, "fn")
	call := func(action string) []iam.Call {
		return []iam.Call{{Action: action, Resource: "arn:aws:dynamodb:us-east-1:000000000000:table/T"}}
	}
	cases := []struct {
		judge  *iam.Judge
		action string
		allow  bool
	}{
		{puts, "dynamodb:PutItem", true},
		{puts, "dynamodb:GetItem", false},
		{gets, "dynamodb:GetItem", true},
		{gets, "dynamodb:PutItem", false},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			d, err := c.judge.Authorize(context.Background(), key, call(c.action))
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed() != c.allow {
				t.Errorf("%s: allowed %v, want %v (%s)", c.action, d.Allowed(), c.allow, d.Message())
			}
		})
	}
	wg.Wait()

	// Close removes the judge's set from the evaluator (an error if the
	// evaluator does not answer 204); the closed judge then answers with
	// an error, never a decision: a stack's pollers still running as it
	// stops must not record denials.
	if err := puts.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := puts.Authorize(t.Context(), key, call("dynamodb:DeleteItem")); err == nil {
		t.Errorf("a closed judge's call: %+v, want an error", d)
	}
	if d, err := gets.Authorize(t.Context(), key, call("dynamodb:GetItem")); err != nil || !d.Allowed() {
		t.Errorf("the other judge, after one closed: %v, %v; want allowed", d, err)
	}
	if d, err := gets.Authorize(t.Context(), key, call("dynamodb:Query")); err != nil || d.Allowed() || d.Reason != iam.ImplicitlyDenied {
		t.Errorf("the other judge, a call it had not judged yet: %+v, %v; want implicitly denied", d, err)
	}
}
