package stack

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ddbpipe/ddbpipe/local/cfn"
	"github.com/ddbpipe/ddbpipe/local/httpapi"
	"github.com/ddbpipe/ddbpipe/shared/platform/sigv4"
)

// httpAuth is what the local HTTP API reads of an AWS::Serverless::HttpApi's
// Auth, so that the local rules follow the template: the default authorizer
// (AWS_IAM when EnableIamAuthorizer and DefaultAuthorizer say so, a JWT
// authorizer's name, or none) and the JWT authorizers with their issuer and
// audience. A route's own Auth.Authorizer (NONE included) wins.
type httpAuth struct {
	defaultAuthorizer string
	jwt               map[string]httpapi.JWTAuthorizer
	// security is the authorizer a route's method has in the API's
	// DefinitionBody (conditions resolved), by "METHOD /path": SAM keeps
	// it over the default. An empty security list is NONE.
	security map[string]string
}

// readHTTPAuth reads the Auth of every HttpApi of the template, by logical id.
func readHTTPAuth(t *cfn.Template, c cfn.Context) (map[string]httpAuth, error) {
	out := map[string]httpAuth{}
	for _, id := range t.ResourceIDs("AWS::Serverless::HttpApi") {
		raw, err := t.Resolve(t.Resources[id].Properties["Auth"], c)
		if err != nil {
			return nil, fmt.Errorf("stack: %s Auth: %w", id, err)
		}
		auth := obj(raw)
		a := httpAuth{defaultAuthorizer: cfn.Scalar(auth["DefaultAuthorizer"]), jwt: map[string]httpapi.JWTAuthorizer{}}
		if a.defaultAuthorizer == httpapi.AuthIAM && cfn.Scalar(auth["EnableIamAuthorizer"]) != "true" {
			return nil, fmt.Errorf("stack: %s: DefaultAuthorizer AWS_IAM needs EnableIamAuthorizer: true", id)
		}
		for name, v := range obj(auth["Authorizers"]) {
			jc := obj(obj(v)["JwtConfiguration"])
			if jc == nil {
				return nil, fmt.Errorf("stack: %s authorizer %s: only JWT authorizers are supported locally", id, name)
			}
			a.jwt[name] = httpapi.JWTAuthorizer{Issuer: cfn.Scalar(jc["issuer"]), Audience: stringList(jc["audience"])}
		}
		body, err := t.Resolve(t.Resources[id].Properties["DefinitionBody"], c)
		if err != nil {
			return nil, fmt.Errorf("stack: %s DefinitionBody: %w", id, err)
		}
		if err := a.readDefinition(obj(body)); err != nil {
			return nil, fmt.Errorf("stack: %s DefinitionBody: %w", id, err)
		}
		out[id] = a
	}
	return out, nil
}

// readDefinition reads the OpenAPI definition's JWT security schemes and
// the security of each method.
func (a *httpAuth) readDefinition(body map[string]any) error {
	a.security = map[string]string{}
	for name, v := range obj(obj(body["components"])["securitySchemes"]) {
		az := obj(obj(v)["x-amazon-apigateway-authorizer"])
		if cfn.Scalar(az["type"]) != "jwt" {
			continue
		}
		jc := obj(az["jwtConfiguration"])
		j := httpapi.JWTAuthorizer{Issuer: cfn.Scalar(jc["issuer"]), Audience: stringList(jc["audience"])}
		if j.Issuer == "" || len(j.Audience) == 0 {
			return fmt.Errorf("JWT authorizer %s needs an issuer and an audience", name)
		}
		a.jwt[name] = j
	}
	for path, item := range obj(body["paths"]) {
		for method, def := range obj(item) {
			sec, ok := obj(def)["security"].([]any)
			if !ok {
				continue
			}
			m := strings.ToUpper(method)
			if method == "x-amazon-apigateway-any-method" {
				m = "ANY"
			}
			name := httpapi.AuthNone
			if len(sec) > 0 {
				for k := range obj(sec[0]) {
					name = k
				}
			}
			a.security[m+" "+path] = name
		}
	}
	return nil
}

// routeAuthorizer is the authorizer of an HttpApi event, in SAM's order: its
// own Auth.Authorizer, else the security its method has in the API's
// DefinitionBody, else the API's default.
func (e *Env) routeAuthorizer(method, path string, props map[string]any) string {
	return e.apiAuth[e.apiOf(props)].authorizer(method, path, props)
}

func (a httpAuth) authorizer(method, path string, props map[string]any) string {
	if name := cfn.Scalar(obj(props["Auth"])["Authorizer"]); name != "" {
		return name
	}
	if name, ok := a.security[method+" "+path]; ok {
		return name
	}
	return a.defaultAuthorizer
}

// stringList reads a string or a list of strings, empty ones dropped.
func stringList(v any) []string {
	var out []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			if s := cfn.Scalar(x); s != "" {
				out = append(out, s)
			}
		}
	default:
		if s := cfn.Scalar(v); s != "" {
			out = []string{s}
		}
	}
	return out
}

// apiOf names the HttpApi an event belongs to: the one its ApiId refers to,
// or the template's only one.
func (e *Env) apiOf(props map[string]any) string {
	if ref := cfn.Scalar(props["ApiId"]); ref != "" {
		if id, ok := e.Stack.ResourceByRef(ref); ok {
			return id
		}
	}
	if len(e.apiAuth) == 1 {
		for id := range e.apiAuth {
			return id
		}
	}
	return ""
}

// apiOptions are the local HTTP API's authorizers: SigV4 against the local
// servers' key and region, and each JWT authorizer of the template.
func (e *Env) apiOptions(jwks *http.Client) []httpapi.Option {
	sig := httpapi.IAM{AccessKeyID: e.Vars["AWS_ACCESS_KEY_ID"], SecretAccessKey: e.Vars["AWS_SECRET_ACCESS_KEY"], Region: e.Vars["AWS_REGION"]}
	if e.Judge != nil {
		sig.Judge = e.Judge // the signer must be allowed execute-api:Invoke on the route
	}
	opts := []httpapi.Option{httpapi.WithIAM(sig), httpapi.WithAccountID(e.Stack.Options.AccountID)}
	for _, a := range e.apiAuth {
		for name, j := range a.jwt {
			j.Client = jwks
			opts = append(opts, httpapi.WithJWTAuthorizer(name, j))
		}
	}
	return opts
}

// APIClient is an HTTP client whose requests to the local HTTP API are
// signed with SigV4 with the local credentials, as the AWS_IAM routes
// require; other hosts (presigned S3 URLs) are left unsigned. It never
// follows redirects, so a test sees the API's own answer.
func (e *Env) APIClient() *http.Client {
	c, err := sigv4.Client(e.AWS, e.APIURL, &http.Client{
		Timeout:       2 * time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	})
	if err != nil {
		panic(err) // Up built e.AWS with static credentials and e.APIURL
	}
	return c
}
