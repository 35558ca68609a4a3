package servers_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// Start the servers from the repository root, point SDK clients at them
// with the variables Vars returns, and store an object in S3.
func ExampleStart() {
	ctx := context.Background()
	root, err := servers.FindRoot(".")
	if err != nil {
		log.Fatal(err)
	}
	stack, err := servers.Start(ctx, servers.Options{Root: root})
	if err != nil {
		log.Fatal(err)
	}
	defer stack.Stop()

	vars := stack.Vars()
	cfg, err := awsenv.FromVars(ctx, func(k string) string { return vars[k] })
	if err != nil {
		log.Fatal(err)
	}
	store := awsenv.S3(cfg)
	if _, err := store.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("example")}); err != nil {
		log.Fatal(err)
	}
	if _, err := store.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("example"), Key: aws.String("hello.txt"), Body: strings.NewReader("hello, local S3")}); err != nil {
		log.Fatal(err)
	}
	obj, err := store.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("example"), Key: aws.String("hello.txt")})
	if err != nil {
		log.Fatal(err)
	}
	defer obj.Body.Close()
	body, err := io.ReadAll(obj.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(body))
	local := true
	for _, url := range []string{stack.DynamoDB, stack.SQS, stack.S3} {
		local = local && strings.HasPrefix(url, "http://127.0.0.1:")
	}
	fmt.Println("DynamoDB, SQS and S3 on 127.0.0.1:", local)
	// Output:
	// hello, local S3
	// DynamoDB, SQS and S3 on 127.0.0.1: true
}

// FromEnv finds servers that are already running, as `ddbpipe local servers
// -- CMD` names them to CMD; such a Stack is not stopped by this process.
func ExampleFromEnv() {
	env := map[string]string{
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
		"AWS_ENDPOINT_URL_SQS":      "http://127.0.0.1:9324",
		"AWS_ENDPOINT_URL_S3":       "http://127.0.0.1:7070",
	}
	stack, ok := servers.FromEnv(func(k string) string { return env[k] })
	fmt.Println(ok, stack.Attached(), stack.SQS)
	vars := stack.Vars()
	fmt.Println(vars["AWS_REGION"], vars["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"], vars["AWS_S3_USE_PATH_STYLE"])

	_, ok = servers.FromEnv(func(string) string { return "" })
	fmt.Println(ok)
	// Output:
	// true true http://127.0.0.1:9324
	// us-east-1 http://127.0.0.1:8000 true
	// false
}
