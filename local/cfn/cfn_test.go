package cfn

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type names struct{}

func (names) Ref(id string) (string, error) { return "phys-" + id, nil }
func (names) GetAtt(id, attr string) (string, error) {
	if attr == "Missing" {
		return "", fmt.Errorf("no %s", attr)
	}
	return "arn:" + id + ":" + attr, nil
}

const sample = `
Parameters:
  Stage: { Type: String, Default: dev, AllowedValues: [dev, prod] }
  Size:  { Type: Number, Default: 10, MinValue: 1, MaxValue: 100 }
Conditions:
  IsProd: !Equals [!Ref Stage, prod]
Globals:
  Function:
    Timeout: 30
    Environment: { Variables: { STAGE: !Ref Stage } }
    Layers: [a]
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "${AWS::StackName}-q-${Stage}"
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 60
      Layers: [b]
      Environment: { Variables: { QUEUE: !GetAtt Queue.Arn, SIZE: !Ref Size } }
      Events:
        Q: { Type: SQS, Properties: { Queue: !GetAtt Queue.Arn } }
Outputs:
  Url:
    Value: !If [IsProd, !Join ["/", [a, !Ref Queue]], !Sub "${!Literal}-${Queue.Arn}"]
`

func mustParse(tb testing.TB, s string) *Template {
	tb.Helper()
	t, err := Parse([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func ctx(tb testing.TB, t *Template, over map[string]string) Context {
	tb.Helper()
	p, err := t.ParamValues(over)
	if err != nil {
		tb.Fatal(err)
	}
	return Context{Params: p, Names: names{}, Pseudo: map[string]string{"AWS::StackName": "stk", "AWS::Region": "r"}}
}

func TestResolve(t *testing.T) {
	tpl := mustParse(t, sample)
	tests := []struct {
		name   string
		value  any
		params map[string]string
		want   any
	}{
		{"ref parameter default", map[string]any{"Ref": "Stage"}, nil, "dev"},
		{"ref parameter override", map[string]any{"Ref": "Stage"}, map[string]string{"Stage": "prod"}, "prod"},
		{"ref resource", map[string]any{"Ref": "Queue"}, nil, "phys-Queue"},
		{"getatt", map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}, nil, "arn:Queue:Arn"},
		{"sub with pseudo and param", tpl.Resources["Queue"].Properties["QueueName"], nil, "stk-q-dev"},
		{"sub with vars map", map[string]any{"Fn::Sub": []any{"${X}-${Stage}", map[string]any{"X": map[string]any{"Ref": "Queue"}}}}, nil, "phys-Queue-dev"},
		{"if false branch keeps literal", tpl.Outputs["Url"].Value, nil, "${Literal}-arn:Queue:Arn"},
		{"if true branch joins", tpl.Outputs["Url"].Value, map[string]string{"Stage": "prod"}, "a/phys-Queue"},
		{"select split", map[string]any{"Fn::Select": []any{1, map[string]any{"Fn::Split": []any{",", "x,y,z"}}}}, nil, "y"},
		{"novalue drops key", map[string]any{"A": 1, "B": map[string]any{"Ref": "AWS::NoValue"}}, nil, map[string]any{"A": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tpl.Resolve(tt.value, ctx(t, tpl, tt.params))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tpl := mustParse(t, sample)
	tests := []struct {
		name  string
		value any
		want  string
	}{
		{"unknown ref", map[string]any{"Ref": "Nope"}, "no such parameter or resource"},
		{"unknown getatt resource", map[string]any{"Fn::GetAtt": []any{"Nope", "Arn"}}, "no such resource"},
		{"unclosed sub", map[string]any{"Fn::Sub": "${Stage"}, "unclosed"},
		{"names error surfaces", map[string]any{"Fn::GetAtt": []any{"Queue", "Missing"}}, "no Missing"},
		{"select out of range", map[string]any{"Fn::Select": []any{5, []any{"a"}}}, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tpl.Resolve(tt.value, ctx(t, tpl, nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParamValues(t *testing.T) {
	tpl := mustParse(t, sample)
	tests := []struct {
		name string
		over map[string]string
		want string // error substring, "" for success
	}{
		{"defaults", nil, ""},
		{"allowed", map[string]string{"Stage": "prod"}, ""},
		{"not allowed", map[string]string{"Stage": "qa"}, "is not one of"},
		{"below min", map[string]string{"Size": "0"}, "outside"},
		{"above max", map[string]string{"Size": "101"}, "outside"},
		{"not a number", map[string]string{"Size": "ten"}, "not a number"},
		{"unknown parameter", map[string]string{"Nope": "1"}, "no such parameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tpl.ParamValues(tt.over)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestFunctionsMergeGlobals(t *testing.T) {
	tpl := mustParse(t, sample)
	fns := tpl.Functions()
	if len(fns) != 1 {
		t.Fatalf("got %d functions, want 1", len(fns))
	}
	f := fns[0]
	if got := f.Timeout(); got != 60 {
		t.Errorf("Timeout = %d, want the resource's 60", got)
	}
	env := f.Environment()
	for _, k := range []string{"STAGE", "QUEUE", "SIZE"} {
		if _, ok := env[k]; !ok {
			t.Errorf("environment lacks %s after merging globals: %v", k, env)
		}
	}
	if got, want := f.Properties["Layers"], []any{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Layers = %v, want lists concatenated %v", got, want)
	}
	if len(f.Events) != 1 || f.Events[0].Type != "SQS" {
		t.Errorf("events = %+v", f.Events)
	}
}

func TestValidateFindsEveryBrokenReference(t *testing.T) {
	tpl := mustParse(t, `
Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties: { TableName: !Ref Missing }
  Q:
    Type: AWS::SQS::Queue
    DependsOn: Ghost
    Properties:
      A: !GetAtt T.StreamArn
      B: !GetAtt T.Nope
      C: !Sub "${Other.Arn}"
Outputs:
  O: { Value: !If [NoSuchCondition, a, b] }
  P: { Condition: GhostCondition, Value: a }
`)
	err := tpl.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	for _, want := range []string{"!Ref Missing", "DependsOn Ghost", "T.StreamArn: the table has no StreamSpecification", "has no attribute Nope", "!GetAtt Other.Arn", "NoSuchCondition", `Outputs.P: condition "GhostCondition"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestDependencyOrder(t *testing.T) {
	tpl := mustParse(t, `
Resources:
  C: { Type: X, Properties: { A: !Ref B } }
  B: { Type: X, Properties: { A: !GetAtt A.Arn } }
  A: { Type: X }
`)
	got, err := tpl.DependencyOrder()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"A", "B", "C"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	cyc := mustParse(t, `
Resources:
  A: { Type: X, Properties: { A: !Ref B } }
  B: { Type: X, Properties: { A: !Ref A } }
`)
	if _, err := cyc.DependencyOrder(); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("got %v, want a cycle error", err)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"not yaml", "a: [", "parse yaml"},
		{"unknown tag", "Resources:\n  A: { Type: X, Properties: { B: !Nope x } }", "unknown tag !Nope"},
		{"duplicate key", "Resources:\n  A: { Type: X }\n  A: { Type: Y }", "duplicate key"},
		{"no resources", "Parameters: {}", "no Resources"},
		{"resource without type", "Resources:\n  A: { Properties: {} }", "has no Type"},
		{"getatt without dot", "Resources:\n  A: { Type: X, Properties: { B: !GetAtt Foo } }", "Resource.Attribute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckLimits(t *testing.T) {
	tpl := mustParse(t, `
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties: { VisibilityTimeout: 30 }
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 60
      MemorySize: 64
      Events:
        Q:
          Type: SQS
          Properties: { Queue: !GetAtt Q.Arn, BatchSize: 100, ScalingConfig: { MaximumConcurrency: 1 } }
        S:
          Type: DynamoDB
          Properties: { Stream: x, StartingPosition: AT_TIMESTAMP, BatchSize: 20000, MaximumRecordAgeInSeconds: 30, ParallelizationFactor: 11,
            FilterCriteria: { Filters: [{ Pattern: '{"a": ["1"]}' }, { Pattern: 'eventName: INSERT' }] } }
        C:
          Type: Schedule
          Properties: { Schedule: "cron(0 0 * * * *)" }
`)
	errs := tpl.CheckLimits(Context{Names: names{}})
	all := fmt.Sprint(errs)
	for _, want := range []string{
		"MemorySize 64", "needs MaximumBatchingWindowInSeconds", "MaximumConcurrency 1", "ReportBatchItemFailures",
		"below 6 × the function timeout", "no RedrivePolicy", "StartingPosition", "BatchSize 20000",
		"MaximumRecordAgeInSeconds 30", "ParallelizationFactor 11", "OnFailure", "cron",
		"filter 2's Pattern is not a JSON object",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("limits miss %q; got:\n%s", want, strings.ReplaceAll(all, "] ", "]\n"))
		}
	}
}

func TestFunctionName(t *testing.T) {
	for id, want := range map[string]string{"CounterFunction": "counter", "ObjectsApiFunction": "objects-api", "VotesApiFunction": "votes-api"} {
		if got := FunctionName(id); got != want {
			t.Errorf("FunctionName(%s) = %q, want %q", id, got, want)
		}
	}
}
