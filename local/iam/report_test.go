package iam

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWildMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		fold, want bool
	}{
		{"arn:aws:dynamodb:r:a:table/s-votes-????-??", "arn:aws:dynamodb:r:a:table/s-votes-2026-11", false, true},
		{"arn:aws:dynamodb:r:a:table/s-votes-????-??", "arn:aws:dynamodb:r:a:table/s-votes-dev-counters", false, false},
		{"arn:aws:s3:::b/table=*", "arn:aws:s3:::b/table=x/month=2026-01/f.parquet", false, true},
		{"arn:aws:s3:::b/table=*", "arn:aws:s3:::b/quarantine/x", false, false},
		{"*", "", false, true},
		{"s3:Get*", "S3:GETOBJECT", true, true},
		{"s3:Get*", "S3:GETOBJECT", false, false},
	} {
		if got := wildMatch(tt.pattern, tt.s, tt.fold); got != tt.want {
			t.Errorf("wildMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// A run's records read back and checked: each grant used or explained, a
// denial named, a reason that explains nothing named, names of stacks and
// stream labels folded so runs add up.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	policy := func(stmts ...string) json.RawMessage {
		return json.RawMessage(`{"Version":"2012-10-17","Statement":[` + strings.Join(stmts, ",") + `]}`)
	}
	for _, stack := range []string{"s1", "s2"} {
		table := "arn:aws:dynamodb:us-east-1:000000000000:table/" + stack + "-objects"
		p := &Policies{Identities: map[string]IdentityPolicies{
			"ReaperFunction": {Role: "ReaperFunctionRole", Policies: []NamedPolicy{{Name: "p", Policy: policy(
				`{"Effect":"Allow","Action":["dynamodb:GetRecords","dynamodb:DescribeStream"],"Resource":"`+table+`/stream/2026-01-02T03:04:05.678"}`,
				`{"Effect":"Allow","Action":"logs:PutLogEvents","Resource":"arn:aws:logs:us-east-1:000000000000:log-group:x"}`,
				`{"Effect":"Allow","Action":["s3:DeleteObjectVersion"],"Resource":"arn:aws:s3:::`+stack+`-objects/blobs/*"}`,
				`{"Effect":"Deny","Action":"s3:*","Resource":"*"}`,
			)}}},
		}}
		if err := WritePolicies(dir, stack, stack, p); err != nil {
			t.Fatal(err)
		}
		calls := []Triple{
			{"ReaperFunction", "dynamodb:GetRecords", table + "/stream/2026-01-02T03:04:05.678", Allowed},
			{Admin, "dynamodb:CreateTable", table, Allowed},
		}
		if stack == "s2" {
			calls = append(calls, Triple{"ReaperFunction", "s3:DeleteObject", "arn:aws:s3:::s2-objects/blobs/x", ImplicitlyDenied})
		}
		var b strings.Builder
		for _, c := range calls {
			line, _ := json.Marshal(c)
			b.Write(append(line, '\n'))
		}
		if err := os.WriteFile(filepath.Join(dir, "calls-"+stack+".jsonl"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := ReadRuns(dir)
	if err != nil || len(runs) != 2 {
		t.Fatalf("ReadRuns: %d runs, %v", len(runs), err)
	}
	reasons := []Reason{
		{Identity: "*Function", Actions: []string{"logs:*"}, Why: "Lambda writes the logs"},
		{Identity: "Nobody", Actions: []string{"sqs:SendMessage"}, Why: "explains nothing"},
	}
	rep := Check(runs, reasons)
	stream := "arn:aws:dynamodb:us-east-1:000000000000:table/" + StackToken + "-objects/stream/" + StreamLabelToken
	if got := rep.Triples(); len(got) != 1 || got[0].Action != "dynamodb:GetRecords" || got[0].Resource != stream || got[0].Stacks != 2 {
		t.Errorf("triples %+v, want the reaper's GetRecords on %s, made by 2 stacks", got, stream)
	}
	if len(rep.Denied) != 1 || rep.Denied[0].Resource != "arn:aws:s3:::"+StackToken+"-objects/blobs/x" {
		t.Errorf("denied %+v, want the reaper's DeleteObject", rep.Denied)
	}
	var unused []string
	for _, g := range rep.Unused {
		unused = append(unused, g.Action+" "+g.Resource)
	}
	want := []string{"dynamodb:DescribeStream " + stream, "s3:DeleteObjectVersion arn:aws:s3:::" + StackToken + "-objects/blobs/*"}
	if strings.Join(unused, "|") != strings.Join(want, "|") {
		t.Errorf("unused %q, want %q", unused, want)
	}
	if len(rep.Stale) != 1 || rep.Stale[0].Identity != "Nobody" {
		t.Errorf("stale reasons %+v, want the one that explains nothing", rep.Stale)
	}
	err = rep.Err()
	for _, w := range []string{"denied: ReaperFunction s3:DeleteObject", "never called", "documents no grant"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Err() = %v, want it to say %q", err, w)
		}
	}
	var out strings.Builder
	rep.Write(&out)
	if !strings.Contains(out.String(), "not called: Lambda writes the logs") || !strings.Contains(out.String(), "DENIED ") {
		t.Errorf("report:\n%s", out.String())
	}
}

// An SSE-KMS bucket's objects need the key too: written, GenerateDataKey;
// read, Decrypt; a HEAD, nothing; CompleteMultipartUpload reads the parts.
func TestKMSCalls(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:000000000000:key/k"
	p := Place{Region: "us-east-1", AccountID: "000000000000", BucketKeys: map[string]string{"enc": key}}
	q := func(s string) map[string][]string {
		out := map[string][]string{}
		for _, kv := range strings.Split(s, "&") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				out[k] = []string{v}
			} else if kv != "" {
				out[kv] = []string{""}
			}
		}
		return out
	}
	for _, tt := range []struct {
		name, method, path, query string
		want                      string // the KMS action, "" none
	}{
		{"put", "PUT", "/enc/a", "", "kms:GenerateDataKey"},
		{"get", "GET", "/enc/a", "", "kms:Decrypt"},
		{"get a version", "GET", "/enc/a", "versionId=v", "kms:Decrypt"},
		{"head", "HEAD", "/enc/a", "", ""},
		{"upload part", "PUT", "/enc/a", "partNumber=1&uploadId=u", "kms:GenerateDataKey"},
		{"complete", "POST", "/enc/a", "uploadId=u", "kms:Decrypt"},
		{"delete", "DELETE", "/enc/a", "", ""},
		{"list", "GET", "/enc", "list-type=2", ""},
		{"put elsewhere", "PUT", "/plain/a", "", ""},
	} {
		calls, err := Map(Request{Service: S3, Method: tt.method, Path: tt.path, Query: q(tt.query), Header: map[string][]string{}, Host: "127.0.0.1:9000"}, p)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		got := ""
		for _, c := range calls {
			if strings.HasPrefix(c.Action, "kms:") {
				got = c.Action
				if c.Resource != key || c.Context["kms:ViaService"] != "s3.us-east-1.amazonaws.com" {
					t.Errorf("%s: %+v, want the key through S3", tt.name, c)
				}
			}
		}
		if got != tt.want {
			t.Errorf("%s: KMS call %q, want %q (calls %v)", tt.name, got, tt.want, calls)
		}
	}
}
