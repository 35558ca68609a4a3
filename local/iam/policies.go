package iam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// Transformed returns the template after the SAM transform (JSON), as
// `sam deploy` would create it: the roles SAM generates, its policy
// templates expanded. The transform runs tools/cfncheck/transform.py with
// python3 (aws-sam-translator, as `make lint` uses it) once per template
// content; the result is cached in cacheDir under the hash of the
// template, the script and the python command.
func Transformed(ctx context.Context, root, template, cacheDir string) ([]byte, error) {
	src, err := os.ReadFile(template)
	if err != nil {
		return nil, fmt.Errorf("iam: %w", err)
	}
	script := filepath.Join(root, "tools", "cfncheck", "transform.py")
	code, err := os.ReadFile(script)
	if err != nil {
		return nil, fmt.Errorf("iam: the SAM transform's script: %w", err)
	}
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	h := sha256.New()
	for _, part := range [][]byte{src, code, []byte(python)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	cached := filepath.Join(cacheDir, "transformed-"+hex.EncodeToString(h.Sum(nil)[:8])+".json")
	if b, err := os.ReadFile(cached); err == nil {
		return b, nil
	}
	cmd := exec.CommandContext(ctx, python, script, template)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("iam: the SAM transform of %s (%s tools/cfncheck/transform.py; needs pip install aws-sam-translator boto3, or run with IAM enforcement off): %w\n%s",
			filepath.Base(template), python, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.MkdirAll(cacheDir, 0o755); err == nil {
		// Written aside then renamed: concurrent stacks never read half a file.
		tmp, err := os.CreateTemp(cacheDir, ".transformed-*")
		if err == nil {
			_, werr := tmp.Write(out)
			cerr := tmp.Close()
			if werr != nil || cerr != nil || os.Rename(tmp.Name(), cached) != nil {
				_ = os.Remove(tmp.Name())
			}
		}
	}
	return out, nil
}

// Policies are the documents the judge evaluates, resolved to the local
// stack's names and ARNs.
type Policies struct {
	// Identities hold each identity's policies, by identity name: each
	// function's execution role (inline and attached managed policies)
	// under the function's logical id, and each managed policy of the
	// template under PolicyIdentityName.
	Identities map[string]IdentityPolicies
	// Resources are the resource-based policies, by the ARN they guard (a
	// bucket's, a queue's).
	Resources map[string]json.RawMessage
	// BucketKeys are the buckets encrypted by default with a KMS key (SSE-KMS),
	// with the key's ARN (Place.BucketKeys).
	BucketKeys map[string]string
}

// IdentityPolicies are an identity's role and its policy documents.
type IdentityPolicies struct {
	Role      string        `json:"role"` // the role's (or the managed policy's) logical id
	Principal string        `json:"principal"`
	Policies  []NamedPolicy `json:"policies"`
}

// NamedPolicy is one policy document.
type NamedPolicy struct {
	Name   string          `json:"name"`
	Policy json.RawMessage `json:"policy"`
}

// ReadPolicies reads the identity and resource policies of a transformed
// template, resolving its intrinsics against c (the local stack's names).
func ReadPolicies(transformed []byte, c cfn.Context, p Place) (*Policies, error) {
	t, err := cfn.Parse(transformed)
	if err != nil {
		return nil, fmt.Errorf("iam: transformed template: %w", err)
	}
	r := &policyReader{
		t: t, c: c, p: p, stack: c.Pseudo["AWS::StackName"],
		out:      &Policies{Identities: map[string]IdentityPolicies{}, Resources: map[string]json.RawMessage{}, BucketKeys: map[string]string{}},
		managed:  map[string]json.RawMessage{},
		attached: map[string][]string{},
	}
	for _, step := range []func() error{
		r.managedPolicies, // before the roles they are attached to
		r.functionRoles,
		r.bucketPolicies,
		r.queuePolicies,
		r.bucketKeys,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if len(r.out.Identities) == 0 {
		return nil, errors.New("iam: the transformed template has no function role and no managed policy")
	}
	return r.out, nil
}

// policyReader is one ReadPolicies: the template, what resolves it, and
// the policies read so far.
type policyReader struct {
	t     *cfn.Template
	c     cfn.Context
	p     Place
	stack string // the stack's name
	out   *Policies

	managed  map[string]json.RawMessage // managed policy id → its document
	attached map[string][]string        // role → managed policy ids (by the policies' Roles)
}

// live is the template's resource id, if its condition holds.
func (r *policyReader) live(id string) (cfn.Resource, bool) {
	res, ok := r.t.Resources[id]
	if !ok {
		return res, false
	}
	on, err := r.t.ConditionTrue(res.Condition, r.c)
	return res, err == nil && on
}

// resolve is a policy document with its intrinsics resolved and its ARNs
// normalized.
func (r *policyReader) resolve(what string, v any) (json.RawMessage, error) {
	res, err := r.t.Resolve(v, r.c)
	if err != nil {
		return nil, fmt.Errorf("iam: %s: %w", what, err)
	}
	b, err := json.Marshal(normalizeARNs(res, r.p))
	if err != nil {
		return nil, fmt.Errorf("iam: %s: %w", what, err)
	}
	return b, nil
}

// managedPolicies reads the managed policies, each an identity of its
// own, and the roles they are attached to by their Roles.
func (r *policyReader) managedPolicies() error {
	for _, id := range r.t.ResourceIDs("AWS::IAM::ManagedPolicy") {
		res, ok := r.live(id)
		if !ok {
			continue
		}
		doc, err := r.resolve(id, res.Properties["PolicyDocument"])
		if err != nil {
			return err
		}
		r.managed[id] = doc
		for _, role := range asList(res.Properties["Roles"]) {
			if ref := refOf(role); ref != "" {
				r.attached[ref] = append(r.attached[ref], id)
			}
		}
		name := PolicyIdentityName(id)
		r.out.Identities[name] = IdentityPolicies{
			Role: id, Principal: fmt.Sprintf("arn:aws:iam::%s:role/%s-%s", r.p.AccountID, r.stack, name),
			Policies: []NamedPolicy{{Name: id, Policy: doc}},
		}
	}
	return nil
}

// functionRoles reads each function's execution role: its inline
// policies and the managed ones attached to it.
func (r *policyReader) functionRoles() error {
	for _, id := range r.t.ResourceIDs("AWS::Lambda::Function") {
		res, ok := r.live(id)
		if !ok {
			continue
		}
		roleID := getAttOf(res.Properties["Role"])
		role, ok := r.live(roleID)
		if !ok || role.Type != "AWS::IAM::Role" {
			return fmt.Errorf("iam: function %s: its Role is not a role of the template", id)
		}
		ip, err := r.rolePolicies(roleID, role)
		if err != nil {
			return err
		}
		r.out.Identities[id] = ip
	}
	return nil
}

// rolePolicies are a role's inline policies, then its managed ones in
// the order of their ids.
func (r *policyReader) rolePolicies(roleID string, role cfn.Resource) (IdentityPolicies, error) {
	ip := IdentityPolicies{Role: roleID, Principal: fmt.Sprintf("arn:aws:iam::%s:role/%s-%s", r.p.AccountID, r.stack, roleID)}
	for i, pol := range asList(role.Properties["Policies"]) {
		m, _ := pol.(map[string]any)
		name := cfn.Scalar(m["PolicyName"])
		if name == "" {
			name = fmt.Sprintf("%s-inline-%d", roleID, i)
		}
		doc, err := r.resolve(roleID+" "+name, m["PolicyDocument"])
		if err != nil {
			return ip, err
		}
		ip.Policies = append(ip.Policies, NamedPolicy{Name: name, Policy: doc})
	}
	policyIDs := r.attached[roleID]
	for _, arn := range asList(role.Properties["ManagedPolicyArns"]) {
		ref := refOf(arn)
		if _, ok := r.managed[ref]; ok {
			policyIDs = append(policyIDs, ref)
			continue
		}
		s, _ := r.t.ResolveString(arn, r.c)
		return ip, fmt.Errorf("iam: role %s attaches %s, which is not a managed policy of the template: the local judge cannot read it", roleID, s)
	}
	slices.Sort(policyIDs)
	for _, mp := range slices.Compact(policyIDs) {
		ip.Policies = append(ip.Policies, NamedPolicy{Name: mp, Policy: r.managed[mp]})
	}
	return ip, nil
}

// bucketPolicies reads the buckets' resource policies.
func (r *policyReader) bucketPolicies() error {
	for _, id := range r.t.ResourceIDs("AWS::S3::BucketPolicy") {
		res, ok := r.live(id)
		if !ok {
			continue
		}
		bucket, err := r.t.ResolveString(res.Properties["Bucket"], r.c)
		if err != nil {
			return fmt.Errorf("iam: %s Bucket: %w", id, err)
		}
		doc, err := r.resolve(id, res.Properties["PolicyDocument"])
		if err != nil {
			return err
		}
		r.out.Resources["arn:aws:s3:::"+bucket] = doc
	}
	return nil
}

// queuePolicies reads the queues' resource policies.
func (r *policyReader) queuePolicies() error {
	for _, id := range r.t.ResourceIDs("AWS::SQS::QueuePolicy") {
		res, ok := r.live(id)
		if !ok {
			continue
		}
		doc, err := r.resolve(id, res.Properties["PolicyDocument"])
		if err != nil {
			return err
		}
		queues, err := r.t.Resolve(res.Properties["Queues"], r.c)
		if err != nil {
			return fmt.Errorf("iam: %s Queues: %w", id, err)
		}
		for _, q := range asList(queues) {
			name, err := queueNameOf(cfn.Scalar(q))
			if err != nil {
				return fmt.Errorf("iam: %s: %w", id, err)
			}
			r.out.Resources[r.p.queueARN(name)] = doc
		}
	}
	return nil
}

// bucketKeys reads the buckets encrypted with a KMS key, and gives each
// key its policy.
func (r *policyReader) bucketKeys() error {
	for _, id := range r.t.ResourceIDs("AWS::S3::Bucket") {
		res, ok := r.live(id)
		if !ok || res.Properties["BucketEncryption"] == nil {
			continue
		}
		name, err := r.t.ResolveString(res.Properties["BucketName"], r.c)
		if err != nil {
			return fmt.Errorf("iam: %s BucketName: %w", id, err)
		}
		enc, err := r.t.Resolve(res.Properties["BucketEncryption"], r.c)
		if err != nil {
			return fmt.Errorf("iam: %s BucketEncryption: %w", id, err)
		}
		m, _ := enc.(map[string]any)
		for _, rule := range asList(m["ServerSideEncryptionConfiguration"]) {
			rm, _ := rule.(map[string]any)
			def, _ := rm["ServerSideEncryptionByDefault"].(map[string]any)
			if key := cfn.Scalar(def["KMSMasterKeyID"]); cfn.Scalar(def["SSEAlgorithm"]) == "aws:kms" && key != "" {
				r.out.BucketKeys[name] = key
				// A key's own policy must allow too (KMS requires it). The
				// key is not the template's: its policy is taken as AWS's
				// default one, which lets the account's IAM policies decide
				// (KmsKeyArn's description asks for that).
				r.out.Resources[key] = json.RawMessage(fmt.Sprintf(
					`{"Version":"2012-10-17","Statement":[{"Sid":"Enable IAM User Permissions","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::%s:root"},"Action":"kms:*","Resource":"*"}]}`,
					r.p.AccountID))
			}
		}
	}
	return nil
}

// ResourcePolicyKey is the key of the resource policy that guards a call's
// resource: the bucket of an S3 object, the queue itself.
func ResourcePolicyKey(resource string) string {
	if rest, ok := strings.CutPrefix(resource, "arn:aws:s3:::"); ok {
		bucket, _, _ := strings.Cut(rest, "/")
		return "arn:aws:s3:::" + bucket
	}
	return resource
}

// normalizeARNs puts the DynamoDB ARNs the local servers gave (region
// "ddblocal") in the stack's region, everywhere in a resolved document.
func normalizeARNs(v any, p Place) any {
	switch x := v.(type) {
	case string:
		return p.dynamoARN(x)
	case []any:
		for i := range x {
			x[i] = normalizeARNs(x[i], p)
		}
	case map[string]any:
		for k := range x {
			x[k] = normalizeARNs(x[k], p)
		}
	}
	return v
}

func asList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case nil:
		return nil
	}
	return []any{v}
}

// refOf returns X of {"Ref": X}.
func refOf(v any) string {
	m, _ := v.(map[string]any)
	if len(m) != 1 {
		return ""
	}
	s, _ := m["Ref"].(string)
	return s
}

// getAttOf returns X of {"Fn::GetAtt": [X, "Arn"]} (or "X.Arn").
func getAttOf(v any) string {
	m, _ := v.(map[string]any)
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		if len(g) == 2 {
			s, _ := g[0].(string)
			return s
		}
	case string:
		id, _, _ := strings.Cut(g, ".")
		return id
	}
	return ""
}
