package cfn

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Names gives the physical values that resource references resolve to:
// local names from the local stack, or real ones in AWS.
type Names interface {
	Ref(logicalID string) (string, error)
	GetAtt(logicalID, attr string) (string, error)
}

// Context is what values resolve against.
type Context struct {
	Params map[string]string // effective parameter values (see ParamValues)
	Pseudo map[string]string // AWS::Region, AWS::AccountId, AWS::StackName, AWS::Partition, AWS::URLSuffix
	Names  Names
}

// noValue stands for AWS::NoValue while resolving; the key holding it is dropped.
type noValue struct{}

// ParamValues applies defaults and overrides to the template's parameters and
// checks AllowedValues, AllowedPattern, MinValue and MaxValue.
func (t *Template) ParamValues(overrides map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(t.Parameters))
	for name := range overrides {
		if _, ok := t.Parameters[name]; !ok {
			return nil, fmt.Errorf("%w: parameter override %q: no such parameter", ErrInvalid, name)
		}
	}
	for name, p := range t.Parameters {
		v, ok := overrides[name]
		if !ok {
			if p.Default == nil {
				return nil, fmt.Errorf("%w: parameter %s has no default and no value", ErrInvalid, name)
			}
			v = scalar(p.Default)
		}
		if len(p.AllowedValues) > 0 {
			allowed := false
			for _, a := range p.AllowedValues {
				allowed = allowed || scalar(a) == v
			}
			if !allowed {
				return nil, fmt.Errorf("%w: parameter %s=%q is not one of %v", ErrInvalid, name, v, p.AllowedValues)
			}
		}
		if p.AllowedPattern != "" {
			re, err := regexp.Compile("^(?:" + p.AllowedPattern + ")$")
			if err != nil {
				return nil, fmt.Errorf("%w: parameter %s: AllowedPattern %q: %v", ErrInvalid, name, p.AllowedPattern, err)
			}
			if !re.MatchString(v) {
				return nil, fmt.Errorf("%w: parameter %s=%q does not match %s", ErrInvalid, name, v, p.AllowedPattern)
			}
		}
		if p.Type == "Number" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: parameter %s=%q is not a number", ErrInvalid, name, v)
			}
			if p.MinValue != nil && f < *p.MinValue || p.MaxValue != nil && f > *p.MaxValue {
				return nil, fmt.Errorf("%w: parameter %s=%v is outside [%v, %v]", ErrInvalid, name, f, deref(p.MinValue), deref(p.MaxValue))
			}
		}
		out[name] = v
	}
	return out, nil
}

func deref(f *float64) any {
	if f == nil {
		return "-"
	}
	return *f
}

// Resolve evaluates every intrinsic in v.
func (t *Template) Resolve(v any, c Context) (any, error) {
	r, err := t.resolve(v, c)
	if err != nil {
		return nil, err
	}
	if _, ok := r.(noValue); ok {
		return nil, nil
	}
	return r, nil
}

// ResolveString evaluates v and requires a scalar result.
func (t *Template) ResolveString(v any, c Context) (string, error) {
	r, err := t.Resolve(v, c)
	if err != nil {
		return "", err
	}
	switch r.(type) {
	case map[string]any, []any:
		return "", fmt.Errorf("%w: expected a scalar, got %T", ErrInvalid, r)
	}
	return scalar(r), nil
}

func (t *Template) resolve(v any, c Context) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			r, err := t.resolve(e, c)
			if err != nil {
				return nil, err
			}
			if _, ok := r.(noValue); !ok {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if fn, arg, ok := intrinsic(x); ok {
			return t.call(fn, arg, c)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := t.resolve(e, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, ok := r.(noValue); !ok {
				out[k] = r
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

// intrinsic reports whether m is a single-key intrinsic function call.
func intrinsic(m map[string]any) (string, any, bool) {
	if len(m) != 1 {
		return "", nil, false
	}
	for k, v := range m {
		if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			return k, v, true
		}
	}
	return "", nil, false
}

func (t *Template) call(fn string, arg any, c Context) (any, error) {
	switch fn {
	case "Ref":
		return t.ref(str(arg), c)
	case "Fn::GetAtt":
		return t.getAtt(arg, c)
	case "Fn::Sub":
		return t.sub(arg, c)
	case "Fn::Join":
		return t.join(arg, c)
	case "Fn::Select":
		return t.selectItem(arg, c)
	case "Fn::Split":
		return t.split(arg, c)
	case "Fn::If":
		args, ok := arg.([]any)
		if !ok || len(args) != 3 {
			return nil, fmt.Errorf("%w: !If needs [condition, then, else]", ErrInvalid)
		}
		cond, err := t.condition(str(args[0]), c)
		if err != nil {
			return nil, err
		}
		if cond {
			return t.resolve(args[1], c)
		}
		return t.resolve(args[2], c)
	case "Condition":
		return t.condition(str(arg), c)
	case "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or":
		return t.evalBool(map[string]any{fn: arg}, c)
	case "Fn::ToJsonString":
		return nil, fmt.Errorf("%w: %s is not supported locally", ErrInvalid, fn)
	}
	return nil, fmt.Errorf("%w: %s is not supported locally", ErrInvalid, fn)
}

// getAtt resolves !GetAtt against the context's names.
func (t *Template) getAtt(arg any, c Context) (any, error) {
	res, attr, err := getAttArgs(arg)
	if err != nil {
		return nil, err
	}
	if _, ok := t.Resources[res]; !ok {
		return nil, fmt.Errorf("%w: !GetAtt %s.%s: no such resource", ErrInvalid, res, attr)
	}
	if c.Names == nil {
		return nil, fmt.Errorf("%w: !GetAtt %s.%s: no names to resolve against", ErrInvalid, res, attr)
	}
	return c.Names.GetAtt(res, attr)
}

// join resolves !Join [delimiter, list].
func (t *Template) join(arg any, c Context) (any, error) {
	args, err := twoArgs(arg, "!Join needs [delimiter, list]")
	if err != nil {
		return nil, err
	}
	list, err := t.resolve(args[1], c)
	if err != nil {
		return nil, err
	}
	items, ok := list.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: !Join needs a list", ErrInvalid)
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = scalar(it)
	}
	return strings.Join(parts, str(args[0])), nil
}

// selectItem resolves !Select [index, list].
func (t *Template) selectItem(arg any, c Context) (any, error) {
	args, err := twoArgs(arg, "!Select needs [index, list]")
	if err != nil {
		return nil, err
	}
	idx, err := t.resolve(args[0], c)
	if err != nil {
		return nil, err
	}
	i, err := strconv.Atoi(scalar(idx))
	if err != nil {
		return nil, fmt.Errorf("%w: !Select index %v", ErrInvalid, idx)
	}
	list, err := t.resolve(args[1], c)
	if err != nil {
		return nil, err
	}
	items, ok := list.([]any)
	if !ok || i < 0 || i >= len(items) {
		return nil, fmt.Errorf("%w: !Select index %d out of range", ErrInvalid, i)
	}
	return items[i], nil
}

// split resolves !Split [delimiter, string].
func (t *Template) split(arg any, c Context) (any, error) {
	args, err := twoArgs(arg, "!Split needs [delimiter, string]")
	if err != nil {
		return nil, err
	}
	s, err := t.ResolveString(args[1], c)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, p := range strings.Split(s, str(args[0])) {
		out = append(out, p)
	}
	return out, nil
}

// twoArgs is an intrinsic's list of two arguments, or an error saying
// the form it needs.
func twoArgs(arg any, form string) ([]any, error) {
	args, ok := arg.([]any)
	if !ok || len(args) != 2 {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, form)
	}
	return args, nil
}

func getAttArgs(arg any) (string, string, error) {
	switch a := arg.(type) {
	case []any:
		if len(a) == 2 {
			return str(a[0]), str(a[1]), nil
		}
	case string:
		if res, attr, ok := strings.Cut(a, "."); ok {
			return res, attr, nil
		}
	}
	return "", "", fmt.Errorf("%w: !GetAtt needs Resource.Attribute, got %v", ErrInvalid, arg)
}

func (t *Template) ref(name string, c Context) (any, error) {
	if name == "AWS::NoValue" {
		return noValue{}, nil
	}
	if strings.HasPrefix(name, "AWS::") {
		v, ok := c.Pseudo[name]
		if !ok {
			return nil, fmt.Errorf("%w: !Ref %s: pseudo parameter not set", ErrInvalid, name)
		}
		return v, nil
	}
	if _, ok := t.Parameters[name]; ok {
		v, ok := c.Params[name]
		if !ok {
			return nil, fmt.Errorf("%w: !Ref %s: parameter has no value", ErrInvalid, name)
		}
		return v, nil
	}
	if _, ok := t.Resources[name]; ok {
		if c.Names == nil {
			return nil, fmt.Errorf("%w: !Ref %s: no names to resolve against", ErrInvalid, name)
		}
		return c.Names.Ref(name)
	}
	return nil, fmt.Errorf("%w: !Ref %s: no such parameter or resource", ErrInvalid, name)
}

func (t *Template) sub(arg any, c Context) (any, error) {
	var format string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		format = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("%w: !Sub needs a string or [string, map]", ErrInvalid)
		}
		format = str(a[0])
		for k, v := range mapOf(a[1]) {
			r, err := t.resolve(v, c)
			if err != nil {
				return nil, fmt.Errorf("!Sub variable %s: %w", k, err)
			}
			vars[k] = r
		}
	default:
		return nil, fmt.Errorf("%w: !Sub needs a string or [string, map]", ErrInvalid)
	}
	var b strings.Builder
	err := walkSub(format, func(lit string) { b.WriteString(lit) }, func(name string) error {
		if v, ok := vars[name]; ok {
			b.WriteString(scalar(v))
			return nil
		}
		var r any
		var err error
		if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			r, err = t.call("Fn::GetAtt", []any{res, attr}, c)
		} else {
			r, err = t.ref(name, c)
		}
		if err != nil {
			return err
		}
		b.WriteString(scalar(r))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.String(), nil
}

// walkSub splits a !Sub format into literals and ${Name} variables; ${!x} is the literal ${x}.
func walkSub(format string, lit func(string), variable func(string) error) error {
	for {
		i := strings.Index(format, "${")
		if i < 0 {
			lit(format)
			return nil
		}
		lit(format[:i])
		j := strings.IndexByte(format[i:], '}')
		if j < 0 {
			return fmt.Errorf("%w: !Sub %q: unclosed ${", ErrInvalid, format)
		}
		name := format[i+2 : i+j]
		format = format[i+j+1:]
		if strings.HasPrefix(name, "!") {
			lit("${" + name[1:] + "}")
			continue
		}
		if err := variable(strings.TrimSpace(name)); err != nil {
			return err
		}
	}
}

func (t *Template) condition(name string, c Context) (bool, error) {
	def, ok := t.Conditions[name]
	if !ok {
		return false, fmt.Errorf("%w: condition %q not defined", ErrInvalid, name)
	}
	return t.evalBool(def, c)
}

// ConditionTrue evaluates a named condition (true for the empty name).
func (t *Template) ConditionTrue(name string, c Context) (bool, error) {
	if name == "" {
		return true, nil
	}
	return t.condition(name, c)
}

func (t *Template) evalBool(v any, c Context) (bool, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return false, fmt.Errorf("%w: condition is not a function: %v", ErrInvalid, v)
	}
	fn, arg, ok := intrinsic(m)
	if !ok {
		return false, fmt.Errorf("%w: condition is not a function: %v", ErrInvalid, v)
	}
	args, _ := arg.([]any)
	switch fn {
	case "Condition":
		return t.condition(str(arg), c)
	case "Fn::Equals":
		if len(args) != 2 {
			return false, fmt.Errorf("%w: !Equals needs two values", ErrInvalid)
		}
		a, err := t.ResolveString(args[0], c)
		if err != nil {
			return false, err
		}
		b, err := t.ResolveString(args[1], c)
		if err != nil {
			return false, err
		}
		return a == b, nil
	case "Fn::Not":
		if len(args) != 1 {
			return false, fmt.Errorf("%w: !Not needs one condition", ErrInvalid)
		}
		b, err := t.evalBool(args[0], c)
		return !b, err
	case "Fn::And", "Fn::Or":
		and := fn == "Fn::And"
		result := and
		for _, a := range args {
			b, err := t.evalBool(a, c)
			if err != nil {
				return false, err
			}
			if and {
				result = result && b
			} else {
				result = result || b
			}
		}
		return result, nil
	}
	return false, fmt.Errorf("%w: %s is not a condition function", ErrInvalid, fn)
}

// Ref is one reference found in a value.
type Ref struct {
	Target string // logical id, parameter or pseudo parameter
	Attr   string // for GetAtt
}

// Refs lists the references (Ref, GetAtt, Sub variables) in v, sorted.
func Refs(v any) []Ref {
	seen := map[Ref]bool{}
	var walk func(any, map[string]bool)
	walk = func(v any, local map[string]bool) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, local)
			}
		case map[string]any:
			if fn, arg, ok := intrinsic(x); ok {
				switch fn {
				case "Ref":
					seen[Ref{Target: str(arg)}] = true
					return
				case "Fn::GetAtt":
					if res, attr, err := getAttArgs(arg); err == nil {
						seen[Ref{Target: res, Attr: attr}] = true
					}
					return
				case "Fn::Sub":
					format := ""
					vars := map[string]bool{}
					switch a := arg.(type) {
					case string:
						format = a
					case []any:
						if len(a) == 2 {
							format = str(a[0])
							for k, e := range mapOf(a[1]) {
								vars[k] = true
								walk(e, local)
							}
						}
					}
					_ = walkSub(format, func(string) {}, func(name string) error {
						if vars[name] {
							return nil
						}
						if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
							seen[Ref{Target: res, Attr: attr}] = true
						} else {
							seen[Ref{Target: name}] = true
						}
						return nil
					})
					return
				}
			}
			for _, e := range x {
				walk(e, local)
			}
		}
	}
	walk(v, nil)
	out := make([]Ref, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Target != out[j].Target {
			return out[i].Target < out[j].Target
		}
		return out[i].Attr < out[j].Attr
	})
	return out
}

// scalar renders a resolved scalar the way CloudFormation does in strings.
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// Scalar renders a resolved scalar value as a string.
func Scalar(v any) string { return scalar(v) }
