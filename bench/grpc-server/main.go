// A gRPC server for bench/grpc.py: grpc-go serving demo.v1.Greeter's
// SayHello ("hello " + name) and Countdown (`times` replies), without
// generated code — messages are raw bytes (a codec that passes them
// through), read and written as protobuf by hand. It prints its port.
//
//	go run . [-port 0]
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"
)

// raw passes messages through as bytes (registered as "proto": clients
// send application/grpc, whose codec is proto).
type raw struct{}

func (raw) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(b []byte, v any) error    { *(v.(*[]byte)) = append([]byte(nil), b...); return nil }
func (raw) Name() string                       { return "proto" }

// request reads HelloRequest{name = 1, times = 2}.
func request(b []byte) (name string, times int64) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			name, b = string(v), b[m:]
		case num == 2 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			times, b = int64(v), b[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return
			}
			b = b[m:]
		}
	}
	return
}

// reply writes HelloReply{message = 1, n = 2}.
func reply(message string, n int64) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, message)
	if n != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(n))
	}
	return b
}

func sayHello(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in []byte
	if err := dec(&in); err != nil {
		return nil, err
	}
	name, _ := request(in)
	out := reply("hello "+name, 0)
	return &out, nil
}

func countdown(_ any, stream grpc.ServerStream) error {
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	name, times := request(in)
	for n := times; n > 0; n-- {
		out := reply(fmt.Sprintf("%s %d", name, n), n)
		if err := stream.SendMsg(&out); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: a free one)")
	flag.Parse()
	encoding.RegisterCodec(raw{})
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer(grpc.MaxConcurrentStreams(1000))
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "demo.v1.Greeter",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "SayHello", Handler: sayHello}},
		Streams: []grpc.StreamDesc{{
			StreamName: "Countdown", Handler: countdown, ServerStreams: true,
		}},
	}, struct{}{})
	fmt.Println(lis.Addr().(*net.TCPAddr).Port)
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
