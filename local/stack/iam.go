package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/faultproxy"
	"github.com/ddbpipe/ddbpipe/local/iam"
	"github.com/ddbpipe/ddbpipe/local/provision"
	"github.com/ddbpipe/ddbpipe/local/runner"
	"github.com/ddbpipe/ddbpipe/local/servers"
)

// The variables of local.env that name the identities: DDBPIPE_IAM says
// whether calls are judged; DDBPIPE_IAM_KEY_<IDENTITY> is the access key id
// an identity signs with (the secret is AWS_SECRET_ACCESS_KEY's; the
// AWS_ACCESS_KEY_ID of local.env is the admin's, allowed everything).
const (
	// EnforceIAMVar, when set in the environment (1/true/on, 0/false/off),
	// overrides Options.NoIAM.
	EnforceIAMVar = "DDBPIPE_ENFORCE_IAM"
	IAMVar        = "DDBPIPE_IAM"
	IAMKeyPrefix  = "DDBPIPE_IAM_KEY_"
	// IAMRecordsVar names a folder where every judged stack without an
	// Options.IAMRecords of its own writes its record of judged calls
	// (calls-<stack>.jsonl) and the policies they were judged against
	// (policies-<stack>.json), instead of <state-dir>/iam: how `make test`
	// and `make iam` gather the records of every stack of a run for
	// iam.Check. Tests that make denied calls on purpose set IAMRecords.
	IAMRecordsVar = "DDBPIPE_IAM_RECORDS"
)

// iamGate is the judge the proxies ask, set once the stack is provisioned.
// Before it is set (provisioning) only the admin may call.
type iamGate struct {
	judge atomic.Pointer[iam.Judge]
	auth  map[iam.Service]faultproxy.Authorizer
	admin string
	// searchProxy is the search proxy; search is it behind the judge
	// (iam.OpenSearchGate), set with judge (iam_search.go).
	searchProxy, search http.Handler
}

func (g *iamGate) authorizer(svc iam.Service) faultproxy.Authorizer {
	return func(r *http.Request, op faultproxy.Operation, body []byte) *faultproxy.Denial {
		if g.judge.Load() == nil {
			if key := iam.SigningKey(r); key != g.admin {
				return &faultproxy.Denial{Message: "the local stack is starting: only its admin credentials may call yet, not " + key}
			}
			return nil
		}
		return g.auth[svc](r, op, body)
	}
}

// startJudge reads the roles and resource policies of the transformed
// template, starts the evaluator and puts it in front of the proxies.
func (e *Env) startJudge(ctx context.Context, o Options, progress io.Writer) error {
	// The transform depends on the template and the script alone: one
	// cache for every stack of the machine (a test's stack has a state
	// folder of its own, and make test starts twenty).
	stateDir := filepath.Join(o.stateDir(), "iam")
	dir := stateDir
	if cache, err := TransformCacheDir(); err == nil {
		dir = cache
	}
	transformed, err := iam.Transformed(ctx, o.Root, o.Template, dir)
	if err != nil {
		return err
	}
	place := e.place()
	pol, err := iam.ReadPolicies(transformed, e.Stack.Context, place)
	if err != nil {
		return err
	}
	place.BucketKeys = pol.BucketKeys
	if err := servers.InstallIAMJudge(ctx, servers.Options{Root: o.Root, Log: progress}); err != nil {
		return err
	}
	// The records are the stack's own (<state-dir>/iam), never the
	// machine's transform cache: a stack's calls would pile up there.
	recDir, name := stateDir, e.Stack.Options.StackName
	switch d := os.Getenv(IAMRecordsVar); {
	case o.IAMRecords != "":
		recDir = o.IAMRecords
	case d != "":
		// Shared by every process of a run: two processes may run stacks
		// of the same name (`local up`'s default, ddbpipe).
		recDir, name = d, fmt.Sprintf("%s.%d", name, os.Getpid())
	}
	if err := os.MkdirAll(recDir, 0o755); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	if err := iam.WritePolicies(recDir, name, e.Stack.Options.StackName, pol); err != nil {
		return err
	}
	logPath := filepath.Join(recDir, "calls-"+name+".jsonl")
	f, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	e.iamLog, e.IAMLogPath = f, logPath
	j, err := iam.Start(ctx, iam.Config{
		Place: place, Policies: pol, AdminKey: e.Vars["AWS_ACCESS_KEY_ID"],
		Dir: servers.IAMJudgeDir(o.Root), Evaluator: os.Getenv(iam.EvaluatorURLVar), Log: f, Stderr: e.flog, Denials: progress,
	})
	if err != nil {
		return err
	}
	e.Judge = j
	secret := e.Vars["AWS_SECRET_ACCESS_KEY"]
	e.gate.auth = map[iam.Service]faultproxy.Authorizer{
		iam.DynamoDB: j.ProxyAuthorizer(iam.DynamoDB, secret, e.log),
		iam.SQS:      j.ProxyAuthorizer(iam.SQS, secret, e.log),
		iam.S3:       j.ProxyAuthorizer(iam.S3, secret, e.log),
	}
	if e.gate.searchProxy != nil {
		e.gate.search = j.OpenSearchGate(e.gate.searchProxy, e.log)
	}
	e.gate.judge.Store(j)
	e.Vars[IAMVar] = "on"
	for _, name := range mapKeys(pol.Identities) {
		e.Vars[IAMKeyPrefix+provision.SnakeUpper(strings.ReplaceAll(name, "-", "_"))] = iam.AccessKeyID(e.Vars["AWS_ACCESS_KEY_ID"], name)
	}
	return nil
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// EnforceIAM reports whether stacks judge IAM: as EnforceIAMVar says
// (1/true/on, else off) when it is set, else def (Options.NoIAM's
// opposite for a stack).
func EnforceIAM(def bool) bool {
	if v := os.Getenv(EnforceIAMVar); v != "" {
		return v == "1" || v == "true" || v == "on"
	}
	return def
}

// TransformCacheDir is the machine's cache of SAM-transformed templates
// (iam.Transformed), which every stack's judge and tests/ read.
func TransformCacheDir() (string, error) {
	cache, err := servers.CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "sam-transform"), nil
}

// iamOffBy says what turned the IAM judge off, for the stack's first words.
func iamOffBy() string {
	if v := os.Getenv(EnforceIAMVar); v != "" {
		return EnforceIAMVar + "=" + v
	}
	return "-iam=false"
}

// place is where the stack's resources live.
func (e *Env) place() iam.Place {
	p := iam.Place{Region: e.Vars["AWS_REGION"], AccountID: e.Stack.Options.AccountID}
	for _, r := range e.Stack.Resources {
		if r.Type == provision.TypeSearchDomain && !r.Skipped {
			p.SearchDomain = r.Attrs["Arn"]
		}
	}
	return p
}

// AWSAs is the stack's AWS configuration signed as an identity: a
// function's logical id or a managed policy's identity ("producer"). With
// IAM enforcement off it is the admin's.
func (e *Env) AWSAs(identity string) aws.Config {
	cfg := e.AWS.Copy()
	if e.Judge != nil && identity != iam.Admin {
		cfg.Credentials = credentials.NewStaticCredentialsProvider(iam.AccessKeyID(e.Vars["AWS_ACCESS_KEY_ID"], identity), e.Vars["AWS_SECRET_ACCESS_KEY"], "")
	}
	return cfg
}

// pollers are the clients a function's event source mappings use: Lambda
// polls and reports failures with the function's execution role.
func (e *Env) pollers(logicalID string) (runner.StreamsAPI, runner.SQSAPI) {
	if e.Judge == nil {
		return e.Streams, e.Clients.SQS
	}
	cfg := e.AWSAs(logicalID)
	return dynamodbstreams.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
}

// IAMReport writes, per identity, the distinct calls judged so far.
func (e *Env) IAMReport(w io.Writer) {
	if e.Judge == nil {
		fmt.Fprintln(w, "IAM enforcement is off: no call was judged")
		return
	}
	by := map[string][]iam.Triple{}
	for t := range e.Judge.Triples() {
		by[t.Identity] = append(by[t.Identity], t)
	}
	for _, id := range mapKeys(by) {
		ts := by[id]
		slices.SortFunc(ts, func(a, b iam.Triple) int {
			return strings.Compare(a.Action+a.Resource, b.Action+b.Resource)
		})
		fmt.Fprintf(w, "%s\n", id)
		for _, t := range ts {
			fmt.Fprintf(w, "  %-18s %-40s %s\n", t.Decision, t.Action, t.Resource)
		}
	}
}
