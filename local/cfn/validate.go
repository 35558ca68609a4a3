package cfn

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// attributes lists the GetAtt attributes each resource type offers.
var attributes = map[string][]string{
	TypeTable:                    {"Arn", "StreamArn"},
	TypeQueue:                    {"Arn", "QueueName", "QueueUrl"},
	TypeBucket:                   {"Arn", "DomainName", "RegionalDomainName"},
	TypeFunction:                 {"Arn"},
	TypeHttpApi:                  {"ApiEndpoint", "ApiId"},
	"AWS::Lambda::Function":      {"Arn"},
	"AWS::IAM::Role":             {"Arn", "RoleId"},
	"AWS::SNS::Topic":            {"TopicArn", "TopicName"},
	"AWS::CloudWatch::Alarm":     {"Arn"},
	"AWS::Glue::Database":        {},
	"AWS::Glue::Table":           {},
	"AWS::Athena::NamedQuery":    {"NamedQueryId"},
	"AWS::Athena::WorkGroup":     {"CreationTime"},
	"AWS::CloudWatch::Dashboard": {},
}

var pseudo = map[string]bool{
	"AWS::AccountId": true, "AWS::Region": true, "AWS::StackName": true, "AWS::StackId": true,
	"AWS::Partition": true, "AWS::URLSuffix": true, "AWS::NoValue": true, "AWS::NotificationARNs": true,
}

// Validate checks that every reference in the template resolves: each !Ref
// names a parameter, pseudo parameter or resource, each !GetAtt an attribute
// the resource type has, each condition exists. It returns all problems.
func (t *Template) Validate() error {
	var errs []error
	check := func(where string, v any) {
		for _, r := range Refs(v) {
			if r.Attr == "" {
				_, isParam := t.Parameters[r.Target]
				_, isRes := t.Resources[r.Target]
				if !isParam && !isRes && !pseudo[r.Target] {
					errs = append(errs, fmt.Errorf("%s: !Ref %s: no such parameter or resource", where, r.Target))
				}
				continue
			}
			res, ok := t.Resources[r.Target]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: !GetAtt %s.%s: no such resource", where, r.Target, r.Attr))
				continue
			}
			attrs, known := attributes[res.Type]
			if !known {
				continue
			}
			if !contains(attrs, r.Attr) {
				errs = append(errs, fmt.Errorf("%s: !GetAtt %s.%s: %s has no attribute %s", where, r.Target, r.Attr, res.Type, r.Attr))
			}
			if res.Type == TypeTable && r.Attr == "StreamArn" && len(mapOf(res.Properties["StreamSpecification"])) == 0 {
				errs = append(errs, fmt.Errorf("%s: !GetAtt %s.StreamArn: the table has no StreamSpecification", where, r.Target))
			}
		}
		conds(v, func(name string) {
			if _, ok := t.Conditions[name]; !ok {
				errs = append(errs, fmt.Errorf("%s: condition %q not defined", where, name))
			}
		})
	}
	for _, id := range t.ResourceIDs("") {
		r := t.Resources[id]
		check("Resources."+id, r.Properties)
		for _, d := range r.DependsOn {
			if _, ok := t.Resources[d]; !ok {
				errs = append(errs, fmt.Errorf("Resources.%s: DependsOn %s: no such resource", id, d))
			}
		}
		if r.Condition != "" {
			if _, ok := t.Conditions[r.Condition]; !ok {
				errs = append(errs, fmt.Errorf("Resources.%s: condition %q not defined", id, r.Condition))
			}
		}
	}
	check("Globals", t.Globals)
	check("Conditions", t.Conditions)
	names := make([]string, 0, len(t.Outputs))
	for n := range t.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		check("Outputs."+n, t.Outputs[n].Value)
		if c := t.Outputs[n].Condition; c != "" {
			if _, ok := t.Conditions[c]; !ok {
				errs = append(errs, fmt.Errorf("Outputs.%s: condition %q not defined", n, c))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

func conds(v any, found func(string)) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			conds(e, found)
		}
	case map[string]any:
		if fn, arg, ok := intrinsic(x); ok {
			if fn == "Condition" {
				found(str(arg))
				return
			}
			if a, ok := arg.([]any); ok && fn == "Fn::If" && len(a) > 0 {
				found(str(a[0]))
				for _, e := range a[1:] {
					conds(e, found)
				}
				return
			}
		}
		for _, e := range x {
			conds(e, found)
		}
	}
}

// DependencyOrder returns resource ids so that each comes after the
// resources it references (Ref, GetAtt, Sub, DependsOn). It fails on cycles.
func (t *Template) DependencyOrder() ([]string, error) {
	deps := map[string][]string{}
	for id, r := range t.Resources {
		set := map[string]bool{}
		for _, ref := range Refs(r.Properties) {
			if _, ok := t.Resources[ref.Target]; ok && ref.Target != id {
				set[ref.Target] = true
			}
		}
		for _, d := range r.DependsOn {
			set[d] = true
		}
		for d := range set {
			deps[id] = append(deps[id], d)
		}
		sort.Strings(deps[id])
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(id string, path []string) error
	visit = func(id string, path []string) error {
		switch state[id] {
		case 1:
			return fmt.Errorf("%w: dependency cycle: %s", ErrInvalid, strings.Join(append(path, id), " → "))
		case 2:
			return nil
		}
		state[id] = 1
		for _, d := range deps[id] {
			if err := visit(d, append(path, id)); err != nil {
				return err
			}
		}
		state[id] = 2
		order = append(order, id)
		return nil
	}
	for _, id := range t.ResourceIDs("") {
		if err := visit(id, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
