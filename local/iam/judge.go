package iam

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:embed judge.mjs
var judgeScript []byte

// The evaluator's decisions.
const (
	Allowed          = "Allowed"
	ExplicitlyDenied = "ExplicitlyDenied"
	ImplicitlyDenied = "ImplicitlyDenied"
	// Unjudged: the evaluator could not evaluate the call (an action it
	// does not know, a resource of the wrong type for the action).
	Unjudged = "Error"
)

// Decision is the verdict on one request.
type Decision struct {
	Identity string
	// Denied is the first call not allowed, nil when all were.
	Denied *Call
	// Reason is Denied's decision (ExplicitlyDenied, ImplicitlyDenied,
	// Unjudged) with the evaluator's words for Unjudged.
	Reason string
	// Principal is the identity's role ARN, for the error message.
	Principal string
}

// Allowed reports whether every call of the request was allowed.
func (d Decision) Allowed() bool { return d.Denied == nil }

// Message is the denial as AWS words it.
func (d Decision) Message() string {
	if d.Denied == nil {
		return ""
	}
	who := d.Principal
	if who == "" {
		who = d.Identity
	}
	why := "because no identity-based policy allows the " + d.Denied.Action + " action"
	switch {
	case d.Reason == ExplicitlyDenied:
		why = "with an explicit deny in a policy"
	case strings.HasPrefix(d.Reason, Unjudged):
		why = "because the local IAM judge could not evaluate it (" + d.Reason + ")"
	}
	return fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", who, d.Denied.Action, d.Denied.Resource, why)
}

// Config configures a Judge.
type Config struct {
	Place    Place
	Policies *Policies
	// AdminKey is the access key id of the admin identity; every other
	// identity's key is AccessKeyID(AdminKey, name).
	AdminKey string
	// Node runs the evaluator (default: node on PATH); Dir holds its npm
	// packages (servers.IAMJudgeDir).
	Node, Dir string
	// Evaluator, when set, is a running evaluator shared with other
	// judges (EvaluatorURLVar): the judge loads its policies into it as a
	// set of its own and starts no process. Node and Dir are then unused.
	Evaluator string
	// Log, when set, receives one JSON line per distinct judged triple
	// (identity, action, resource) and decision: the record `make iam`
	// reads. Stderr receives the evaluator's own errors.
	Log    io.Writer
	Stderr io.Writer
	// Denials, when set, receives one line per distinct denied triple as
	// it happens, naming the identity, the action and the resource.
	Denials io.Writer
}

// Judge authorizes the local stack's calls. Its methods are safe for
// concurrent use.
type Judge struct {
	place    Place
	adminKey string
	byKey    map[string]Identity
	policies *Policies
	url      string
	set      string     // the judge's policy set in the evaluator
	own      *Evaluator // the evaluator this judge started; nil when shared
	client   *http.Client
	// closeMu: Authorize holds it to read while it may ask the evaluator,
	// Close to write; after Close, Authorize fails as it did when the
	// judge's own evaluator had stopped. (A shared evaluator would answer
	// a removed set's calls "unknown policy set", recorded as denied.)
	closeMu sync.RWMutex
	closed  bool

	cache sync.Map // cacheKey → string decision

	recMu   sync.Mutex
	seen    map[Triple]int
	log     io.Writer
	denials io.Writer
	timesMu sync.Mutex
	times   []time.Duration // every judged request's
	hits    []time.Duration // those answered from the cache alone
	misses  []time.Duration // those that asked the evaluator
}

// Triple is one distinct judged call.
type Triple struct {
	Identity, Action, Resource, Decision string
}

// EvaluatorURLVar names a running evaluator for every stack of a run to
// share (`ddbpipe local servers` starts one): a judge then costs no node
// process of its own, and the evaluator's code is warm from the first
// call. make test's stacks each started one: 27 processes, 25 s of CPU.
const EvaluatorURLVar = "DDBPIPE_IAM_JUDGE_URL"

// Evaluator is the judge's evaluator process (judge.mjs under node).
type Evaluator struct {
	URL   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// StartEvaluator starts an evaluator: node (default: node on PATH) runs
// judge.mjs from dir, where its npm packages are (servers.IAMJudgeDir).
// Its own errors go to stderr.
func StartEvaluator(ctx context.Context, node, dir string, stderr io.Writer) (*Evaluator, error) {
	if node == "" {
		var err error
		if node, err = exec.LookPath("node"); err != nil {
			return nil, fmt.Errorf("iam: the IAM judge needs node: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@cloud-copilot", "iam-simulate")); err != nil {
		return nil, fmt.Errorf("iam: the IAM judge's npm packages are not in %s (ddbpipe local install): %w", dir, err)
	}
	script := filepath.Join(dir, "judge.mjs")
	if old, err := os.ReadFile(script); err != nil || !bytes.Equal(old, judgeScript) {
		// Written aside then renamed: a judge starting meanwhile never
		// reads half a script.
		tmp := fmt.Sprintf("%s.%d", script, os.Getpid())
		if err := os.WriteFile(tmp, judgeScript, 0o644); err != nil {
			return nil, fmt.Errorf("iam: %w", err)
		}
		if err := os.Rename(tmp, script); err != nil {
			return nil, fmt.Errorf("iam: %w", err)
		}
	}
	ev := &Evaluator{cmd: exec.Command(node, script), done: make(chan struct{})}
	ev.cmd.Dir = dir
	ev.cmd.Stderr = stderr
	stdout, err := ev.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	if ev.stdin, err = ev.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	if err := ev.cmd.Start(); err != nil {
		return nil, fmt.Errorf("iam: start the judge: %w", err)
	}
	go func() { _ = ev.cmd.Wait(); close(ev.done) }()
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		ev.URL = "http://" + net.JoinHostPort("127.0.0.1", p)
		return ev, nil
	case <-ev.done:
		return nil, errors.New("iam: the judge exited before listening (see its stderr)")
	case <-time.After(30 * time.Second):
		_ = ev.Close()
		return nil, errors.New("iam: the judge did not listen within 30 s")
	case <-ctx.Done():
		_ = ev.Close()
		return nil, ctx.Err()
	}
}

// Close stops the evaluator.
func (ev *Evaluator) Close() error {
	_ = ev.stdin.Close()
	select {
	case <-ev.done:
	case <-time.After(3 * time.Second):
		_ = ev.cmd.Process.Kill()
		<-ev.done
	}
	return nil
}

// Start loads the policies into an evaluator as a set of their own: the
// shared one c.Evaluator names, else one it starts for this judge alone.
func Start(ctx context.Context, c Config) (*Judge, error) {
	if c.Policies == nil {
		return nil, errors.New("iam: no policies")
	}
	j := &Judge{
		place: c.Place, adminKey: c.AdminKey, policies: c.Policies, byKey: map[string]Identity{},
		seen: map[Triple]int{}, log: c.Log, denials: c.Denials, url: c.Evaluator, set: newSetName(),
	}
	for name, ip := range c.Policies.Identities {
		key := AccessKeyID(c.AdminKey, name)
		j.byKey[key] = Identity{Name: name, AccessKeyID: key, Principal: ip.Principal, Role: ip.Role}
	}
	if j.url == "" {
		ev, err := StartEvaluator(ctx, c.Node, c.Dir, c.Stderr)
		if err != nil {
			return nil, err
		}
		j.own, j.url = ev, ev.URL
	}
	j.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 5 * time.Minute,
	}}
	if err := j.load(ctx); err != nil {
		_ = j.Close()
		return nil, err
	}
	return j, nil
}

// newSetName names a judge's policy set: unique among the evaluator's.
func newSetName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (j *Judge) load(ctx context.Context) error {
	type ident struct {
		Principal string        `json:"principal"`
		Policies  []NamedPolicy `json:"policies"`
	}
	doc := struct {
		Identities map[string]ident           `json:"identities"`
		Resources  map[string]json.RawMessage `json:"resources"`
	}{Identities: map[string]ident{}, Resources: j.policies.Resources}
	for name, ip := range j.policies.Identities {
		doc.Identities[name] = ident{Principal: ip.Principal, Policies: ip.Policies}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	return j.policySet(ctx, http.MethodPut, bytes.NewReader(body), "load the policies into the judge")
}

// policySet sends method (PUT, DELETE) to the judge's policy set in the
// evaluator, which answers 204 when it did so; what says what for errors.
func (j *Judge) policySet(ctx context.Context, method string, body io.Reader, what string) error {
	req, err := http.NewRequestWithContext(ctx, method, j.url+"/policies/"+j.set, body)
	if err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return fmt.Errorf("iam: %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("iam: %s: %s: %s", what, resp.Status, b)
	}
	return nil
}

// Close stops the judge's own evaluator, or removes its policies from the
// shared one.
func (j *Judge) Close() error {
	j.closeMu.Lock()
	defer j.closeMu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	if j.own != nil {
		return j.own.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return j.policySet(ctx, http.MethodDelete, nil, "remove the policies from the judge")
}

var errJudgeClosed = errors.New("iam: the judge is closed (its stack is stopping)")

// Identity returns the identity of an access key id.
func (j *Judge) Identity(accessKey string) (Identity, bool) {
	switch accessKey {
	case j.adminKey:
		return Identity{Name: Admin, AccessKeyID: accessKey}, true
	case "":
		return Identity{Name: Anonymous}, true
	}
	id, ok := j.byKey[accessKey]
	return id, ok
}

// AdminKey is the admin identity's access key id.
func (j *Judge) AdminKey() string { return j.adminKey }

// Place is where the judged resources live.
func (j *Judge) Place() Place { return j.place }

// Authorize judges the calls of one request signed with accessKey.
func (j *Judge) Authorize(ctx context.Context, accessKey string, calls []Call) (Decision, error) {
	start := time.Now()
	asked := false
	defer func() { j.observe(time.Since(start), asked) }()
	j.closeMu.RLock()
	defer j.closeMu.RUnlock()
	if j.closed {
		return Decision{}, errJudgeClosed
	}
	id, known := j.Identity(accessKey)
	if !known {
		d := Decision{Identity: accessKey, Reason: ImplicitlyDenied}
		if len(calls) > 0 {
			d.Denied = &calls[0]
		}
		d.Principal = "unknown access key " + accessKey
		for _, c := range calls {
			j.record(Triple{accessKey, c.Action, c.Resource, "UnknownAccessKey"})
		}
		return d, nil
	}
	d := Decision{Identity: id.Name, Principal: id.Principal}
	if id.Name == Admin {
		for _, c := range calls {
			j.record(Triple{Admin, c.Action, c.Resource, Allowed})
		}
		return d, nil
	}
	decisions := make([]string, len(calls))
	var ask []int
	for i, c := range calls {
		if v, ok := j.cache.Load(j.cacheKey(id.Name, c)); ok {
			decisions[i] = v.(string)
		} else {
			ask = append(ask, i)
		}
	}
	if len(ask) > 0 {
		asked = true
		got, err := j.ask(ctx, id, calls, ask)
		if err != nil {
			return d, err
		}
		for n, i := range ask {
			decisions[i] = got[n]
			j.cache.Store(j.cacheKey(id.Name, calls[i]), got[n])
		}
	}
	for i, c := range calls {
		verdict, _, _ := strings.Cut(decisions[i], ":")
		j.record(Triple{id.Name, c.Action, c.Resource, verdict})
		if decisions[i] != Allowed && d.Denied == nil {
			d.Denied = &calls[i]
			d.Reason = decisions[i]
		}
	}
	return d, nil
}

// context is every key the judge sets on a call of id: those AWS sets on
// an SDK's HTTPS request (the local proxies are plain HTTP, but the SDK
// talks to AWS over TLS only, so aws:SecureTransport is true), and the
// call's own.
func (j *Judge) context(id Identity, c Call) map[string]string {
	ctx := map[string]string{
		"aws:SecureTransport":       "true",
		"aws:PrincipalArn":          id.Principal,
		"aws:PrincipalAccount":      j.place.AccountID,
		"aws:RequestedRegion":       j.place.Region,
		"aws:PrincipalIsAWSService": "false",
	}
	for k, v := range c.Context {
		ctx[k] = v
	}
	return ctx
}

func (j *Judge) cacheKey(identity string, c Call) string {
	var b strings.Builder
	b.WriteString(identity)
	b.WriteByte(0)
	b.WriteString(c.Action)
	b.WriteByte(0)
	b.WriteString(c.Resource)
	if len(c.Context) > 0 {
		keys := make([]string, 0, len(c.Context))
		for k := range c.Context {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteByte(0)
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(c.Context[k])
		}
	}
	return b.String()
}

type judgeCall struct {
	Identity       string            `json:"identity"`
	Action         string            `json:"action"`
	Resource       string            `json:"resource"`
	AccountID      string            `json:"accountId"`
	ResourcePolicy string            `json:"resourcePolicy,omitempty"`
	Context        map[string]string `json:"context"`
}

// ask sends calls[ask...] to the evaluator; the decisions come back in
// order, an unjudged one as "Error: <reason>".
func (j *Judge) ask(ctx context.Context, id Identity, calls []Call, ask []int) ([]string, error) {
	req := struct {
		Calls []judgeCall `json:"calls"`
	}{}
	for _, i := range ask {
		c := calls[i]
		jc := judgeCall{Identity: id.Name, Action: c.Action, Resource: c.Resource, AccountID: j.place.AccountID, Context: j.context(id, c)}
		if key := ResourcePolicyKey(c.Resource); j.policies.Resources[key] != nil {
			jc.ResourcePolicy = key
		}
		req.Calls = append(req.Calls, jc)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	hr, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, j.url+"/judge/"+j.set, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	resp, err := j.client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("iam: ask the judge: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("iam: ask the judge: %s: %s", resp.Status, b)
	}
	var out struct {
		Results []struct{ Decision, Error string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("iam: the judge's answer: %w", err)
	}
	if len(out.Results) != len(ask) {
		return nil, fmt.Errorf("iam: the judge answered %d calls of %d", len(out.Results), len(ask))
	}
	res := make([]string, len(ask))
	for n, r := range out.Results {
		res[n] = r.Decision
		if r.Decision == Unjudged {
			res[n] = Unjudged + ": " + r.Error
		}
	}
	return res, nil
}

func (j *Judge) record(t Triple) {
	j.recMu.Lock()
	defer j.recMu.Unlock()
	j.seen[t]++
	if j.seen[t] == 1 && j.log != nil {
		b, _ := json.Marshal(t)
		_, _ = j.log.Write(append(b, '\n'))
	}
	if j.seen[t] == 1 && j.denials != nil && t.Decision != Allowed {
		_, _ = fmt.Fprintf(j.denials, "IAM denied: %s may not %s on %s (%s)\n", t.Identity, t.Action, t.Resource, t.Decision)
	}
}

// Triples returns every distinct judged call with how many times it was made.
func (j *Judge) Triples() map[Triple]int {
	j.recMu.Lock()
	defer j.recMu.Unlock()
	out := make(map[Triple]int, len(j.seen))
	for t, n := range j.seen {
		out[t] = n
	}
	return out
}

func (j *Judge) observe(d time.Duration, asked bool) {
	j.timesMu.Lock()
	defer j.timesMu.Unlock()
	if len(j.times) >= 1<<20 {
		return
	}
	j.times = append(j.times, d)
	if asked {
		j.misses = append(j.misses, d)
	} else {
		j.hits = append(j.hits, d)
	}
}

// Latency returns the judge's time per request at quantile q (0.5: the
// median) and how many requests it judged.
func (j *Judge) Latency(q float64) (time.Duration, int) {
	j.timesMu.Lock()
	ts := slices.Clone(j.times)
	j.timesMu.Unlock()
	return quantile(ts, q)
}

// CacheLatency is Latency over the requests answered from the judge's
// cache alone (cached true) or over those that asked the evaluator.
func (j *Judge) CacheLatency(cached bool, q float64) (time.Duration, int) {
	j.timesMu.Lock()
	ts := slices.Clone(j.misses)
	if cached {
		ts = slices.Clone(j.hits)
	}
	j.timesMu.Unlock()
	return quantile(ts, q)
}

// ResetLatency forgets the times observed so far.
func (j *Judge) ResetLatency() {
	j.timesMu.Lock()
	j.times, j.hits, j.misses = nil, nil, nil
	j.timesMu.Unlock()
}

// ForgetDecisions empties the cache of decisions: the next request of each
// kind asks the evaluator again (the benchmark's cache misses).
func (j *Judge) ForgetDecisions() { j.cache.Clear() }

func quantile(ts []time.Duration, q float64) (time.Duration, int) {
	if len(ts) == 0 {
		return 0, 0
	}
	slices.Sort(ts)
	return ts[min(len(ts)-1, int(q*float64(len(ts))))], len(ts)
}
