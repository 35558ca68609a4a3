package stack

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/httpapi"
)

// TestTemplateAuth reads template.yaml's HttpApi auth as the local stack
// does, under each parameter setting, and checks the authorizer of every
// route: the local HTTP API enforces what AWS would.
func TestTemplateAuth(t *testing.T) {
	tpl, err := cfn.ParseFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const iam, none, jwt = httpapi.AuthIAM, httpapi.AuthNone, "Jwt"
	tests := []struct {
		name   string
		params map[string]string
		want   map[string]string // route key → authorizer
		jwt    *httpapi.JWTAuthorizer
	}{
		{"default: IAM everywhere but /health", nil, map[string]string{
			"GET /health": none, "POST /polls": iam, "GET /polls/{id}": iam, "GET /polls/{id}/results": iam, "GET /polls/{id}/rejects": iam, "ANY /objects/{key+}": iam, "GET /objects": iam,
		}, nil},
		{"JWT for the poll routes", map[string]string{"JwtIssuer": "https://issuer.example", "JwtAudience": "web,cli"}, map[string]string{
			"GET /health": none, "POST /polls": jwt, "GET /polls/{id}": jwt, "GET /polls/{id}/results": jwt, "GET /polls/{id}/rejects": jwt, "ANY /objects/{key+}": iam, "GET /objects": iam,
		}, &httpapi.JWTAuthorizer{Issuer: "https://issuer.example", Audience: []string{"web", "cli"}}},
		{"public results", map[string]string{"PublicPollResults": "true"}, map[string]string{
			"GET /health": none, "POST /polls": iam, "GET /polls/{id}": iam, "GET /polls/{id}/results": none, "GET /polls/{id}/rejects": iam, "ANY /objects/{key+}": iam, "GET /objects": iam,
		}, nil},
		{"public results win over JWT", map[string]string{"PublicPollResults": "true", "JwtIssuer": "https://issuer.example", "JwtAudience": "web"}, map[string]string{
			"GET /health": none, "POST /polls": jwt, "GET /polls/{id}": jwt, "GET /polls/{id}/results": none, "GET /polls/{id}/rejects": jwt, "ANY /objects/{key+}": iam, "GET /objects": iam,
		}, &httpapi.JWTAuthorizer{Issuer: "https://issuer.example", Audience: []string{"web"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params, err := tpl.ParamValues(tt.params)
			if err != nil {
				t.Fatal(err)
			}
			c := cfn.Context{Params: params, Pseudo: map[string]string{"AWS::StackName": "s", "AWS::Region": "us-east-1", "AWS::AccountId": "000000000000", "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}}
			auth, err := readHTTPAuth(tpl, c)
			if err != nil {
				t.Fatal(err)
			}
			api, ok := auth["HttpApi"]
			if !ok || len(auth) != 1 {
				t.Fatalf("HttpApis = %v, want HttpApi only", slices.Collect(maps.Keys(auth)))
			}
			got := map[string]string{}
			for _, f := range tpl.Functions() {
				for _, ev := range f.Events {
					if ev.Type != "HttpApi" {
						continue
					}
					method, path := strings.ToUpper(cfn.Scalar(ev.Properties["Method"])), cfn.Scalar(ev.Properties["Path"])
					got[method+" "+path] = api.authorizer(method, path, ev.Properties)
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("route authorizers = %v, want %v", got, tt.want)
			}
			j, ok := api.jwt[jwt]
			switch {
			case tt.jwt == nil && len(api.jwt) > 0:
				t.Errorf("JWT authorizers = %v, want none", api.jwt)
			case tt.jwt != nil && (!ok || j.Issuer != tt.jwt.Issuer || !slices.Equal(j.Audience, tt.jwt.Audience)):
				t.Errorf("JWT authorizer = %+v, want %+v", j, *tt.jwt)
			}
		})
	}
}
