package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/agentenv/agentenv/client"
)

// model stands for the policy being trained or evaluated: it reads the
// conversation so far and the tools offered, and writes its next reply.
func model(messages []client.Message, tools []client.Tool) string { return "I am done." }

// Play one episode: reset a task, step it with the model's replies until
// it is done, read the reward.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sess, err := client.Dial(ctx, "http://127.0.0.1:8200", client.Options{Token: os.Getenv("AGENTENV_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()

	res, err := sess.Reset(ctx, client.ResetRequest{Split: "eval", Index: 0, ToolFormat: "hermes"})
	if err != nil {
		log.Fatal(err)
	}
	messages, tools := res.Observation.Messages, res.Observation.Tools
	for !res.Done {
		reply := model(messages, tools)
		messages = append(messages, client.Message{Role: "assistant", Content: reply})
		if res, err = sess.Step(ctx, reply); err != nil {
			log.Fatal(err)
		}
		messages = append(messages, res.Observation.Messages...)
		if len(res.Observation.Tools) > 0 { // a new turn opened
			tools = res.Observation.Tools
		}
	}
	fmt.Println("reward", *res.Reward, "grade", res.Observation.Metrics["score/grade"])
}

// Tell the server's error codes apart with errors.Is, and read the
// details with errors.As.
func ExampleError() {
	ctx := context.Background()
	sess, err := client.Dial(ctx, "http://127.0.0.1:8200", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	_, err = sess.Reset(ctx, client.ResetRequest{TaskID: "day/eval-999"})
	var e *client.Error
	switch {
	case errors.Is(err, client.CodeNotFound):
		fmt.Println("no such task")
	case errors.Is(err, client.CodeCapacityReached) && errors.As(err, &e):
		fmt.Printf("server full: %d/%d live, %d queued\n", e.ActiveSessions, e.MaxSessions, e.Queued)
	case errors.Is(err, client.CodeUnauthorized):
		fmt.Println("set AGENTENV_TOKEN")
	case err != nil:
		log.Fatal(err)
	}
}

// A deadline makes Dial and Reset wait out a server that is restarting
// or at capacity; OnRetry reports each wait.
func ExampleSession_Reset_waiting() {
	opts := client.Options{OnRetry: func(err error, wait time.Duration) {
		log.Printf("server not ready (%v); trying again in %s", err, wait.Round(time.Millisecond))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sess, err := client.Dial(ctx, "http://127.0.0.1:8200", opts)
	if err != nil {
		log.Fatal(err) // wraps context.DeadlineExceeded and the last failure
	}
	defer sess.Close()
	if _, err := sess.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001"}); err != nil {
		log.Fatal(err)
	}
}

// Read the task catalogue over HTTP: the splits, a split's tasks, one
// task, a toolset's tools.
func ExampleClient_Tasks() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New("http://127.0.0.1:8200", client.Options{Token: os.Getenv("AGENTENV_TOKEN")})
	if err != nil {
		log.Fatal(err)
	}
	splits, err := c.Splits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range splits {
		fmt.Println(s.Name, s.Size)
	}
	page, err := c.Tasks(ctx, "eval", 0, 10) // the first ten; stop -1: all
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range page.Tasks {
		fmt.Println(t.Index, t.TaskID, t.Toolset)
	}
	task, err := c.Task(ctx, page.Tasks[0].TaskID)
	if err != nil {
		log.Fatal(err)
	}
	tools, err := c.ToolsetTools(ctx, task.Toolset)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Prompt[len(task.Prompt)-1].Content, len(tools))
}
