package provision

import (
	"maps"
	"slices"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
)

func TestSnakeUpper(t *testing.T) {
	for in, want := range map[string]string{
		"VotesQueueUrl": "VOTES_QUEUE_URL", "ArchiveBucketName": "ARCHIVE_BUCKET_NAME", "ApiUrl": "API_URL",
		"ObjectsTableStreamArn": "OBJECTS_TABLE_STREAM_ARN", "S3BucketARN": "S3_BUCKET_ARN", "HTTPApiUrl": "HTTP_API_URL",
	} {
		if got := SnakeUpper(in); got != want {
			t.Errorf("SnakeUpper(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLocalURL(t *testing.T) {
	s := &Stack{Options: Options{APIURL: "http://127.0.0.1:4000/"}}
	for in, want := range map[string]string{
		"https://abc.execute-api.us-east-1.amazonaws.com":        "http://127.0.0.1:4000",
		"https://abc.execute-api.us-east-1.amazonaws.com/prod/x": "http://127.0.0.1:4000/prod/x",
		"https://example.com/":                                   "https://example.com/",
	} {
		if got := s.localURL(in); got != want {
			t.Errorf("localURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A function's LoggingConfig reaches its runtime as Lambda passes it: JSON
// logs at the application's level; text logs need no variable.
func TestFunctionsPassTheirLoggingConfig(t *testing.T) {
	tmpl, err := cfn.Parse([]byte(`
Parameters:
  LogLevel: { Type: String, Default: WARN }
Globals:
  Function:
    LoggingConfig: { LogFormat: JSON, ApplicationLogLevel: !Ref LogLevel }
Resources:
  Json: { Type: AWS::Serverless::Function, Properties: { CodeUri: . } }
  Text: { Type: AWS::Serverless::Function, Properties: { LoggingConfig: { LogFormat: Text } } }
`))
	if err != nil {
		t.Fatal(err)
	}
	params, err := tmpl.ParamValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{Template: tmpl, Resources: map[string]Physical{"Json": {Ref: "json"}, "Text": {Ref: "text"}}}
	s.Context = cfn.Context{Params: params, Names: s}
	fns, err := s.Functions()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"Json": {"AWS_LAMBDA_LOG_FORMAT": "JSON", "AWS_LAMBDA_LOG_LEVEL": "WARN"},
		"Text": {},
	}
	for _, f := range fns {
		if !maps.Equal(f.Env, want[f.LogicalID]) {
			t.Errorf("%s: environment %v, want %v", f.LogicalID, f.Env, want[f.LogicalID])
		}
	}
	if len(fns) != 2 {
		t.Errorf("%d functions, want 2", len(fns))
	}
}

// An OpenSearch domain resolves to the local search proxy: its endpoint is
// the proxy's host:port, its ARNs those AWS would give it, and an output
// of its HTTPS URL becomes the proxy's plain HTTP one.
func TestSearchDomainResolvesToTheProxy(t *testing.T) {
	tmpl, err := cfn.Parse([]byte(`
Resources:
  SearchDomain: { Type: AWS::OpenSearchService::Domain, Properties: { EngineVersion: OpenSearch_2.19 } }
Outputs:
  SearchEndpoint: { Value: !GetAtt SearchDomain.DomainEndpoint }
  SearchUrl: { Value: !Sub "https://${SearchDomain.DomainEndpoint}/objects" }
  SearchArn: { Value: !GetAtt SearchDomain.Arn }
  SearchDomainArn: { Value: !GetAtt SearchDomain.DomainArn }
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		endpoint string
		want     map[string]string
	}{
		{"with a search proxy", "127.0.0.1:4321", map[string]string{
			"SearchEndpoint":  "127.0.0.1:4321",
			"SearchUrl":       "http://127.0.0.1:4321/objects",
			"SearchArn":       "arn:aws:es:us-east-1:000000000000:domain/ddbpipe-searchdomain",
			"SearchDomainArn": "arn:aws:es:us-east-1:000000000000:domain/ddbpipe-searchdomain",
		}},
		{"without one", "", map[string]string{
			"SearchEndpoint":  "arn:aws:local:us-east-1:000000000000:SearchDomain/DomainEndpoint",
			"SearchUrl":       "https://arn:aws:local:us-east-1:000000000000:SearchDomain/DomainEndpoint/objects",
			"SearchArn":       "arn:aws:local:us-east-1:000000000000:SearchDomain/Arn",
			"SearchDomainArn": "arn:aws:local:us-east-1:000000000000:SearchDomain/DomainArn",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Up(t.Context(), tmpl, Clients{}, Options{SearchEndpoint: tt.endpoint})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(s.Outputs, tt.want) {
				t.Errorf("outputs %v, want %v", s.Outputs, tt.want)
			}
			if noLocal := s.NoLocal[TypeSearchDomain]; (noLocal == 0) != (tt.endpoint != "") {
				t.Errorf("counted as having no local equivalent: %d", noLocal)
			}
		})
	}
}

// An output whose condition is false is not there, as in CloudFormation,
// and may name a resource the same condition leaves out.
func TestOutputsFollowTheirCondition(t *testing.T) {
	tmpl, err := cfn.Parse([]byte(`
Parameters:
  On: { Type: String, Default: "true" }
Conditions:
  IsOn: !Equals [!Ref On, "true"]
Resources:
  Thing: { Type: AWS::Example::Thing, Condition: IsOn }
Outputs:
  ThingArn: { Condition: IsOn, Value: !GetAtt Thing.Arn }
  Always: { Value: here }
`))
	if err != nil {
		t.Fatal(err)
	}
	for on, want := range map[string][]string{"true": {"Always", "ThingArn"}, "false": {"Always"}} {
		s, err := Up(t.Context(), tmpl, Clients{}, Options{Params: map[string]string{"On": on}})
		if err != nil {
			t.Fatalf("On=%s: %v", on, err)
		}
		if got := slices.Sorted(maps.Keys(s.Outputs)); !slices.Equal(got, want) {
			t.Errorf("On=%s: outputs %v, want %v", on, got, want)
		}
	}
}
