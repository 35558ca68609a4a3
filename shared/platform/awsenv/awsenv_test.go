package awsenv

import (
	"context"
	"testing"
)

func TestFromVarsEndpoints(t *testing.T) {
	// The SDK also reads the process environment: make it say nothing, so
	// the test holds inside `make test`, which exports the local servers.
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
		"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_S3", "AWS_S3_USE_PATH_STYLE", "AWS_PROFILE", "AWS_CONFIG_FILE"} {
		t.Setenv(k, "")
	}
	vars := map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": "http://127.0.0.1:2",
	}
	cfg, err := FromVars(context.Background(), func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" {
		t.Errorf("region %q", cfg.Region)
	}
	creds, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil || creds.AccessKeyID != "k" || creds.SecretAccessKey != "s" {
		t.Errorf("credentials %+v, %v", creds, err)
	}
	src := endpoints(func(k string) string { return vars[k] })
	for id, want := range map[string]string{"DynamoDB": "http://127.0.0.1:1", "DynamoDB Streams": "http://127.0.0.1:2", "SQS": ""} {
		got, found, _ := src.GetServiceBaseEndpoint(context.Background(), id)
		if got != want || found != (want != "") {
			t.Errorf("%s: got %q %v, want %q", id, got, found, want)
		}
	}
	if !Overridden(cfg, "DynamoDB") || Overridden(cfg, "SQS") {
		t.Error("Overridden does not follow the variables")
	}
	if DynamoDB(cfg).Options().DisableValidateResponseChecksum != true {
		t.Error("the local DynamoDB client still validates checksums")
	}
	if S3(cfg).Options().UsePathStyle {
		t.Error("path style without an S3 endpoint override")
	}
	vars["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:3"
	if !S3(cfg).Options().UsePathStyle {
		t.Error("no path style with an S3 endpoint override")
	}
}
