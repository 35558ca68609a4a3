// Package provision creates the tables, queues and buckets that template.yaml
// declares on the servers the AWS clients point at (the local stack), and
// resolves the template's references, function environments and outputs to
// the names it created. template.yaml stays the one source of truth.
package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

// Clients are the SDK clients resources are created with.
type Clients struct {
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	S3       *s3.Client
}

// Options name the local stack.
type Options struct {
	StackName string            // default "ddbpipe"
	Region    string            // default "us-east-1"
	AccountID string            // default "000000000000"
	Params    map[string]string // parameter overrides
	APIURL    string            // local base URL of the HTTP API (replaces the execute-api URL in outputs)
	// SearchEndpoint is the local search proxy's host:port: an OpenSearch
	// domain's DomainEndpoint ("" leaves domains with no local equivalent).
	SearchEndpoint string
	Log            *slog.Logger
}

// Physical is what one resource resolves to.
type Physical struct {
	Type  string
	Ref   string
	Attrs map[string]string
	// Skipped: no local equivalent (log groups, alarms, policies, keys, ...);
	// its attributes are placeholders, so what refers to it still resolves.
	Skipped bool
}

// Stack is a provisioned template: the names of its resources, its
// functions' resolved settings and its outputs.
type Stack struct {
	Template  *cfn.Template
	Options   Options
	Context   cfn.Context
	Resources map[string]Physical
	Outputs   map[string]string
	Skipped   []string // settings the local servers do not support, for the report
	// NoLocal counts the resources with no local equivalent (alarms, log
	// groups, policies, keys…) by type: created in AWS, not here.
	NoLocal map[string]int
}

var _ cfn.Names = (*Stack)(nil)

// Ref implements cfn.Names.
func (s *Stack) Ref(id string) (string, error) {
	p, ok := s.Resources[id]
	if !ok {
		return "", fmt.Errorf("provision: !Ref %s: not provisioned yet", id)
	}
	return p.Ref, nil
}

// GetAtt implements cfn.Names.
func (s *Stack) GetAtt(id, attr string) (string, error) {
	p, ok := s.Resources[id]
	if !ok {
		return "", fmt.Errorf("provision: !GetAtt %s.%s: not provisioned yet", id, attr)
	}
	v, ok := p.Attrs[attr]
	if !ok && p.Skipped {
		return fmt.Sprintf("arn:aws:local:%s:%s:%s/%s", s.Options.Region, s.Options.AccountID, id, attr), nil
	}
	if !ok {
		return "", fmt.Errorf("provision: !GetAtt %s.%s: attribute not available locally", id, attr)
	}
	return v, nil
}

// Up provisions every resource of the template, in dependency order. It is
// idempotent: existing tables, queues and buckets are kept.
func Up(ctx context.Context, t *cfn.Template, c Clients, o Options) (*Stack, error) {
	if o.StackName == "" {
		o.StackName = "ddbpipe"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	params, err := t.ParamValues(o.Params)
	if err != nil {
		return nil, err
	}
	s := &Stack{Template: t, Options: o, Resources: map[string]Physical{}, Outputs: map[string]string{}}
	s.Context = cfn.Context{
		Params: params,
		Pseudo: map[string]string{
			"AWS::Region": o.Region, "AWS::AccountId": o.AccountID, "AWS::StackName": o.StackName,
			"AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
			"AWS::StackId": fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/local", o.Region, o.AccountID, o.StackName),
		},
		Names: s,
	}
	order, err := t.DependencyOrder()
	if err != nil {
		return nil, err
	}
	for _, id := range order {
		r := t.Resources[id]
		ok, err := t.ConditionTrue(r.Condition, s.Context)
		if err != nil {
			return nil, fmt.Errorf("provision %s: %w", id, err)
		}
		if !ok {
			continue
		}
		start := time.Now()
		p, err := s.create(ctx, c, r)
		if err != nil {
			return nil, fmt.Errorf("provision %s (%s): %w", id, r.Type, err)
		}
		p.Type = r.Type
		s.Resources[id] = p
		if p.Ref != "" {
			o.Log.Debug("provisioned", "resource", id, "type", r.Type, "ref", p.Ref, "took", time.Since(start))
		}
	}
	for name, out := range t.Outputs {
		ok, err := t.ConditionTrue(out.Condition, s.Context)
		if err != nil {
			return nil, fmt.Errorf("provision: output %s: %w", name, err)
		}
		if !ok {
			continue
		}
		v, err := t.ResolveString(out.Value, s.Context)
		if err != nil {
			return nil, fmt.Errorf("provision: output %s: %w", name, err)
		}
		s.Outputs[name] = s.localURL(v)
	}
	return s, nil
}

var executeAPI = regexp.MustCompile(`^https://[^.]+\.execute-api\.[^.]+\.amazonaws\.com(/.*)?$`)

// localURL replaces an API Gateway URL with the local HTTP API's, and an
// HTTPS URL of the search domain with the search proxy's (plain HTTP).
func (s *Stack) localURL(v string) string {
	if m := executeAPI.FindStringSubmatch(v); m != nil && s.Options.APIURL != "" {
		return strings.TrimSuffix(s.Options.APIURL, "/") + m[1]
	}
	if ep := s.Options.SearchEndpoint; ep != "" {
		if rest, ok := strings.CutPrefix(v, "https://"+ep); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
			return "http://" + ep + rest
		}
	}
	return v
}

func (s *Stack) create(ctx context.Context, c Clients, r cfn.Resource) (Physical, error) {
	props, err := s.Template.Resolve(r.Properties, s.Context)
	if err != nil {
		return Physical{}, err
	}
	p, _ := props.(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	switch r.Type {
	case cfn.TypeTable:
		return s.table(ctx, c.DynamoDB, r.LogicalID, p)
	case cfn.TypeQueue:
		return s.queue(ctx, c.SQS, r.LogicalID, p)
	case cfn.TypeBucket:
		return s.bucket(ctx, c.S3, r.LogicalID, p)
	case cfn.TypeFunction, "AWS::Lambda::Function":
		name := cfn.Scalar(p["FunctionName"])
		if name == "" {
			name = s.Options.StackName + "-" + r.LogicalID
		}
		return Physical{Ref: name, Attrs: map[string]string{"Arn": s.FunctionARN(name)}}, nil
	case cfn.TypeHttpApi:
		return Physical{Ref: "local", Attrs: map[string]string{"ApiId": "local", "ApiEndpoint": s.Options.APIURL}}, nil
	case TypeSearchDomain:
		if s.Options.SearchEndpoint != "" {
			return s.searchDomain(r.LogicalID, p), nil
		}
	}
	if s.NoLocal == nil {
		s.NoLocal = map[string]int{}
	}
	s.NoLocal[r.Type]++
	return Physical{Ref: r.LogicalID, Attrs: map[string]string{}, Skipped: true}, nil
}

// TypeSearchDomain is an OpenSearch Service domain: locally, the search
// proxy in front of the local search engine.
const TypeSearchDomain = "AWS::OpenSearchService::Domain"

// searchDomain is a domain's local stand-in: its endpoint is the search
// proxy's host:port (AWS gives a host name, used over HTTPS; the local one
// is plain HTTP), its ARN the one AWS would give the domain.
func (s *Stack) searchDomain(id string, p map[string]any) Physical {
	name := s.physicalName(id, p, "DomainName")
	if len(name) > 28 { // AWS's limit on domain names
		name = name[:28]
	}
	arn := fmt.Sprintf("arn:aws:es:%s:%s:domain/%s", s.Options.Region, s.Options.AccountID, name)
	return Physical{Ref: name, Attrs: map[string]string{
		"DomainEndpoint": s.Options.SearchEndpoint, "Arn": arn, "DomainArn": arn, "Id": name,
	}}
}

// FunctionARN is the ARN a function has in the local stack.
func (s *Stack) FunctionARN(name string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", s.Options.Region, s.Options.AccountID, name)
}

func (s *Stack) physicalName(id string, p map[string]any, prop string) string {
	if n := cfn.Scalar(p[prop]); n != "" {
		return n
	}
	return strings.ToLower(s.Options.StackName + "-" + id)
}

// OutputEnv names each output in UPPER_SNAKE_CASE (VotesQueueUrl →
// VOTES_QUEUE_URL), for the shell-sourceable local.env.
func (s *Stack) OutputEnv() map[string]string {
	out := make(map[string]string, len(s.Outputs))
	for k, v := range s.Outputs {
		out[SnakeUpper(k)] = v
	}
	return out
}

// SnakeUpper turns CamelCase into UPPER_SNAKE_CASE.
func SnakeUpper(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if i > 0 && upper {
			prevLower := rs[i-1] >= 'a' && rs[i-1] <= 'z' || rs[i-1] >= '0' && rs[i-1] <= '9'
			nextLower := i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
			prevUpper := rs[i-1] >= 'A' && rs[i-1] <= 'Z'
			if prevLower || prevUpper && nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteString(strings.ToUpper(string(r)))
	}
	return b.String()
}

// ResourceByRef finds the logical id whose Ref or Arn equals v.
func (s *Stack) ResourceByRef(v string) (string, bool) {
	ids := make([]string, 0, len(s.Resources))
	for id := range s.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := s.Resources[id]
		if p.Ref == v {
			return id, true
		}
		for _, a := range p.Attrs {
			if a == v {
				return id, true
			}
		}
	}
	return "", false
}

var errNotSupported = errors.New("not supported by the local server")
