package iam

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// StackToken stands for a stack's name in the resource patterns of a
// report, so the records of stacks with different names add up.
const StackToken = "${Stack}"

// StreamLabelToken stands for a table's stream label (its creation time)
// in the resource patterns of a report.
const StreamLabelToken = "${StreamLabel}"

var streamLabel = regexp.MustCompile(`/stream/\d{4}-\d\d-\d\dT[\d:.]+`)

// ReasonsKey is the key of the template's top-level Metadata that lists
// the grants no judged call needs to use, each with its reason.
const ReasonsKey = "ddbpipe-iam-unused"

// WritePolicies writes the policies stack is judged against beside its
// record of judged calls (calls-<name>.jsonl), as policies-<name>.json in
// dir; name is the stack's name, made unique when several processes write
// to dir.
func WritePolicies(dir, name, stack string, p *Policies) error {
	b, err := json.Marshal(struct {
		Stack      string                      `json:"stack"`
		Calls      string                      `json:"calls"`
		Identities map[string]IdentityPolicies `json:"identities"`
	}{stack, "calls-" + name + ".jsonl", p.Identities})
	if err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policies-"+name+".json"), b, 0o644); err != nil {
		return fmt.Errorf("iam: %w", err)
	}
	return nil
}

// Run is what one judged stack left: the policies it judged against and
// the distinct calls it judged.
type Run struct {
	Stack      string
	Identities map[string]IdentityPolicies
	Calls      []Triple
}

// ReadRuns reads every stack's record in dir (WritePolicies and the
// judge's log of calls).
func ReadRuns(dir string) ([]Run, error) {
	names, err := filepath.Glob(filepath.Join(dir, "policies-*.json"))
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	sort.Strings(names)
	var runs []Run
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("iam: %w", err)
		}
		var doc struct {
			Stack      string                      `json:"stack"`
			Calls      string                      `json:"calls"`
			Identities map[string]IdentityPolicies `json:"identities"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("iam: %s: %w", name, err)
		}
		run := Run{Stack: doc.Stack, Identities: doc.Identities}
		if doc.Calls == "" {
			doc.Calls = "calls-" + doc.Stack + ".jsonl"
		}
		f, err := os.Open(filepath.Join(dir, filepath.Base(doc.Calls)))
		if err != nil {
			return nil, fmt.Errorf("iam: the calls of stack %s: %w", doc.Stack, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			var t Triple
			if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
				f.Close()
				return nil, fmt.Errorf("iam: the calls of stack %s: %w", doc.Stack, err)
			}
			run.Calls = append(run.Calls, t)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("iam: the calls of stack %s: %w", doc.Stack, err)
		}
		runs = append(runs, run)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("iam: no record of a judged stack in %s", dir)
	}
	return runs, nil
}

// Reason documents grants no judged call has to use: Identity, each of
// Actions and Resource are patterns (* and ?); Resource is written with
// StackToken for the stack's name ("" matches any).
type Reason struct {
	Identity string
	Actions  []string
	Resource string
	Why      string
}

func (r Reason) covers(identity, action, resource string) bool {
	if !wildMatch(r.Identity, identity, false) || (r.Resource != "" && !wildMatch(r.Resource, resource, false)) {
		return false
	}
	for _, a := range r.Actions {
		if wildMatch(a, action, true) {
			return true
		}
	}
	return false
}

// ReadReasons reads the template's documented unused grants: its top-level
// Metadata's ddbpipe-iam-unused list of {Identity, Actions, Resource,
// Reason}.
func ReadReasons(template string) ([]Reason, error) {
	t, err := cfn.ParseFile(template)
	if err != nil {
		return nil, err
	}
	raw, ok := t.Metadata[ReasonsKey]
	if !ok {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("iam: %s: Metadata %s is not a list", template, ReasonsKey)
	}
	var out []Reason
	for i, e := range list {
		m, _ := e.(map[string]any)
		r := Reason{Identity: cfn.Scalar(m["Identity"]), Resource: cfn.Scalar(m["Resource"]), Why: strings.TrimSpace(cfn.Scalar(m["Reason"]))}
		for _, a := range asList(m["Actions"]) {
			r.Actions = append(r.Actions, cfn.Scalar(a))
		}
		if r.Identity == "" || len(r.Actions) == 0 || r.Why == "" {
			return nil, fmt.Errorf("iam: %s: Metadata %s[%d] needs Identity, Actions and Reason", template, ReasonsKey, i)
		}
		out = append(out, r)
	}
	return out, nil
}

// Grant is one action an identity's policies allow on one resource pattern.
type Grant struct {
	Identity, Action, Resource string
	// Used: an allowed call matched it; Why: the documented reason it
	// need not be (either may be set).
	Used bool
	Why  string
}

// CallPattern is a distinct judged call with its resource as the grant
// pattern that allowed it (the resource itself when none did).
type CallPattern struct {
	Identity, Action, Resource, Decision string
	Stacks                               int // how many stacks made it
}

// Report compares the calls judged over a set of runs with the grants of
// the identities that made them.
type Report struct {
	Stacks int
	// Calls are every identity's calls, admin's included.
	Calls []CallPattern
	// Grants are the allow grants of every identity but the admin.
	Grants []Grant
	// Denied are the calls not allowed (resource as called).
	Denied []CallPattern
	// Unused are the grants no call used and no reason documents.
	Unused []Grant
	// Stale are reasons that document no grant of any identity.
	Stale []Reason
}

// Check builds the report of runs against the documented reasons.
func Check(runs []Run, reasons []Reason) *Report {
	rep := &Report{Stacks: len(runs)}
	grants := map[gkey]*Grant{}
	var order []gkey
	calls := map[CallPattern]int{}
	denied := map[CallPattern]int{}
	for _, run := range runs {
		norm := func(s string) string {
			return streamLabel.ReplaceAllLiteralString(strings.ReplaceAll(s, run.Stack, StackToken), "/stream/"+StreamLabelToken)
		}
		// This stack's grants, in the order of its statements.
		type stmtGrant struct {
			key      gkey
			action   string // pattern as written
			resource string // resolved pattern
		}
		byIdentity := map[string][]stmtGrant{}
		for _, name := range mapKeysSorted(run.Identities) {
			for _, np := range run.Identities[name].Policies {
				for _, st := range statements(np.Policy) {
					if st.Effect != "Allow" {
						continue
					}
					for _, a := range st.Action {
						for _, r := range st.Resource {
							k := gkey{name, a, norm(r)}
							if grants[k] == nil {
								grants[k] = &Grant{Identity: name, Action: a, Resource: k.resource}
								order = append(order, k)
							}
							byIdentity[name] = append(byIdentity[name], stmtGrant{k, a, r})
						}
					}
				}
			}
		}
		seen := map[CallPattern]bool{}
		for _, c := range run.Calls {
			cp := CallPattern{Identity: c.Identity, Action: c.Action, Resource: norm(c.Resource), Decision: c.Decision}
			if c.Decision == Allowed {
				for _, g := range byIdentity[c.Identity] {
					if wildMatch(g.action, c.Action, true) && wildMatch(g.resource, c.Resource, false) {
						grants[g.key].Used = true
						cp.Resource = g.key.resource
						break
					}
				}
			} else {
				denied[cp]++
			}
			if !seen[cp] {
				seen[cp] = true
				calls[cp]++
			}
		}
	}
	for cp, n := range calls {
		cp.Stacks = n
		rep.Calls = append(rep.Calls, cp)
	}
	for cp := range denied {
		cp.Stacks = calls[cp]
		rep.Denied = append(rep.Denied, cp)
	}
	sortCalls(rep.Calls)
	sortCalls(rep.Denied)
	rep.explain(order, grants, reasons)
	return rep
}

// gkey is a grant: an identity's action on a resource pattern.
type gkey struct{ identity, action, resource string }

// explain lists the grants in order, each with the first reason that
// covers it; a grant no call used and no reason covers is unused, and a
// reason that covers no grant is stale.
func (rep *Report) explain(order []gkey, grants map[gkey]*Grant, reasons []Reason) {
	documents := make([]bool, len(reasons))
	for _, k := range order {
		g := grants[k]
		for i, r := range reasons {
			if r.covers(g.Identity, g.Action, g.Resource) {
				documents[i] = true
				if g.Why == "" {
					g.Why = r.Why
				}
			}
		}
		rep.Grants = append(rep.Grants, *g)
		if !g.Used && g.Why == "" {
			rep.Unused = append(rep.Unused, *g)
		}
	}
	for i, r := range reasons {
		if !documents[i] {
			rep.Stale = append(rep.Stale, r)
		}
	}
}

func sortCalls(cs []CallPattern) {
	slices.SortFunc(cs, func(a, b CallPattern) int {
		return strings.Compare(a.Identity+"\x00"+a.Action+"\x00"+a.Resource+"\x00"+a.Decision, b.Identity+"\x00"+b.Action+"\x00"+b.Resource+"\x00"+b.Decision)
	})
}

// Err is the report's verdict: every denied call, every undocumented unused
// grant and every reason that documents nothing, named.
func (r *Report) Err() error {
	var errs []error
	for _, d := range r.Denied {
		errs = append(errs, fmt.Errorf("denied: %s %s on %s (%s)", d.Identity, d.Action, d.Resource, d.Decision))
	}
	for _, g := range r.Unused {
		errs = append(errs, fmt.Errorf("granted, never called, no reason in the template's Metadata %s: %s %s on %s", ReasonsKey, g.Identity, g.Action, g.Resource))
	}
	for _, s := range r.Stale {
		errs = append(errs, fmt.Errorf("Metadata %s documents no grant: %s %v on %q", ReasonsKey, s.Identity, s.Actions, s.Resource))
	}
	return errors.Join(errs...)
}

// Triples returns the distinct (identity, action, resource pattern) of the
// allowed calls of every identity but the admin.
func (r *Report) Triples() []CallPattern {
	var out []CallPattern
	for _, c := range r.Calls {
		if c.Identity != Admin && c.Decision == Allowed {
			out = append(out, c)
		}
	}
	return out
}

// Write prints the report per identity: the calls made (as the grant
// pattern that allowed them), then the grants, used or why not.
func (r *Report) Write(w io.Writer) {
	admin := 0
	for _, c := range r.Calls {
		if c.Identity == Admin {
			admin++
		}
	}
	fmt.Fprintf(w, "IAM: %d stacks judged; %d distinct (identity, action, resource pattern) calls by the functions and policies, %d by the admin (the tests' and tools' own credentials, allowed everything); %d denied\n",
		r.Stacks, len(r.Triples()), admin, len(r.Denied))
	byID := map[string][]CallPattern{}
	for _, c := range r.Calls {
		if c.Identity != Admin {
			byID[c.Identity] = append(byID[c.Identity], c)
		}
	}
	grantsBy := map[string][]Grant{}
	for _, g := range r.Grants {
		grantsBy[g.Identity] = append(grantsBy[g.Identity], g)
	}
	names := mapKeysSorted(grantsBy)
	for id := range byID {
		if _, ok := grantsBy[id]; !ok {
			names = append(names, id)
		}
	}
	for _, id := range names {
		fmt.Fprintf(w, "\n%s\n", id)
		for _, c := range byID[id] {
			mark := "called "
			if c.Decision != Allowed {
				mark = "DENIED "
			}
			fmt.Fprintf(w, "  %s %-34s %s\n", mark, c.Action, c.Resource)
		}
		for _, g := range grantsBy[id] {
			state := "used"
			switch {
			case !g.Used && g.Why != "":
				state = "not called: " + g.Why
			case !g.Used:
				state = "NEVER CALLED, no reason documented"
			}
			fmt.Fprintf(w, "  granted %-34s %s  [%s]\n", g.Action, g.Resource, state)
		}
	}
}

// statement is one policy statement's effect, actions and resources.
type statement struct {
	Effect   string
	Action   []string
	Resource []string
}

func statements(doc json.RawMessage) []statement {
	var d struct{ Statement json.RawMessage }
	if json.Unmarshal(doc, &d) != nil {
		return nil
	}
	var raw []map[string]any
	if json.Unmarshal(d.Statement, &raw) != nil {
		var one map[string]any
		if json.Unmarshal(d.Statement, &one) != nil {
			return nil
		}
		raw = []map[string]any{one}
	}
	var out []statement
	for _, m := range raw {
		st := statement{Effect: cfn.Scalar(m["Effect"])}
		for _, a := range asList(m["Action"]) {
			st.Action = append(st.Action, cfn.Scalar(a))
		}
		for _, r := range asList(m["Resource"]) {
			st.Resource = append(st.Resource, cfn.Scalar(r))
		}
		out = append(out, st)
	}
	return out
}

// wildMatch matches s against an IAM pattern: * any run of characters
// (across "/" and ":"), ? one character; fold: case-insensitive (actions).
func wildMatch(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

func mapKeysSorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
