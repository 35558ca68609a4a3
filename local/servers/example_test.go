package servers_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/local/servers"
)

// Start the stack from the repository root and point SDK clients at it.
func ExampleStart() {
	ctx := context.Background()
	stack, err := servers.Start(ctx, servers.Options{Root: ".", Log: os.Stderr})
	if err != nil {
		log.Fatal(err)
	}
	defer stack.Stop()

	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(servers.Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			servers.AccessKeyID, servers.SecretAccessKey, "")),
	)
	if err != nil {
		log.Fatal(err)
	}
	store := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(stack.S3)
		o.UsePathStyle = true
	})
	buckets, err := store.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(buckets.Buckets), "buckets; DynamoDB at", stack.DynamoDB, "SQS at", stack.SQS)
}
