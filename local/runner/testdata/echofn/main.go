// Command echofn is a function for the runner's process tests: it answers
// its payload, or sleeps, panics or exits when the payload says so.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type request struct {
	Do    string `json:"do"`
	Value string `json:"value"`
}

type reply struct {
	Value     string `json:"value"`
	RequestID string `json:"requestId"`
	Pid       int    `json:"pid"`
	Deadline  bool   `json:"deadline"`
}

func main() {
	lambda.Start(func(ctx context.Context, in json.RawMessage) (reply, error) {
		var r request
		if err := json.Unmarshal(in, &r); err != nil {
			return reply{}, err
		}
		lc, _ := lambdacontext.FromContext(ctx)
		_, hasDeadline := ctx.Deadline()
		switch r.Do {
		case "sleep":
			time.Sleep(time.Minute)
		case "fail":
			return reply{}, errors.New("failed as asked")
		case "panic":
			panic("panicked as asked")
		case "exit":
			os.Exit(3)
		}
		return reply{Value: r.Value, RequestID: lc.AwsRequestID, Pid: os.Getpid(), Deadline: hasDeadline}, nil
	})
}
