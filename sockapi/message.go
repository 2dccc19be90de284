package sockapi

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// The message API keeps message boundaries: one message is one connection
// (write, close the write side, read to EOF). A request on a new NDP
// connection goes out in the first round trip with no handshake, which is
// the case NDP is built for (zero-RTT RPC).

// Call sends req to addr as one message on a new connection and returns the
// whole response message. ctx bounds the call (deadline and cancellation).
func (s *Stack) Call(ctx context.Context, addr string, req []byte, opts ...DialOption) ([]byte, error) {
	c, err := s.Dial(ctx, addr, opts...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := bindContext(ctx, c)
	defer stop()
	if _, err := c.WriteAndClose(req); err != nil {
		return nil, ctxErr(ctx, err)
	}
	resp, err := io.ReadAll(c)
	return resp, ctxErr(ctx, err)
}

// CallInto is Call reading the response into resp, without allocating it.
// A response longer than resp fails with ErrMessageTooLarge.
func (s *Stack) CallInto(ctx context.Context, addr Addr, req, resp []byte, opts ...DialOption) (int, error) {
	c, err := s.DialAddr(ctx, addr, opts...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	stop := bindContext(ctx, c)
	defer stop()
	if _, err := c.WriteAndClose(req); err != nil {
		return 0, ctxErr(ctx, err)
	}
	n, err := readMessage(c, resp)
	return n, ctxErr(ctx, err)
}

// SendMessage sends msg to addr as one message on a new connection and
// waits until the receiver has taken it (closed its side); a response, if
// the receiver sends one, is discarded.
func (s *Stack) SendMessage(ctx context.Context, addr string, msg []byte, opts ...DialOption) error {
	c, err := s.Dial(ctx, addr, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := bindContext(ctx, c)
	defer stop()
	if _, err := c.WriteAndClose(msg); err != nil {
		return ctxErr(ctx, err)
	}
	_, err = io.Copy(io.Discard, c) // a reply, if any, is not wanted
	return ctxErr(ctx, err)
}

// readMessage reads c to EOF into buf.
func readMessage(c *Conn, buf []byte) (int, error) {
	n := 0
	for {
		if n == len(buf) {
			var probe [1]byte
			m, err := c.Read(probe[:])
			if m > 0 {
				return n, ErrMessageTooLarge
			}
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			continue
		}
		m, err := c.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// bindContext applies ctx's deadline to c and makes cancellation fail c's
// blocked calls. It returns a function that undoes the cancellation hook.
func bindContext(ctx context.Context, c *Conn) func() {
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	if ctx.Done() == nil {
		return func() {}
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

// ctxErr reports ctx's error when the context ended the call. The conn's
// deadline (ctx's deadline, bindContext) can fire a moment before ctx's own
// timer, so a deadline error after ctx's deadline counts as ctx's too.
func ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return errors.Join(cerr, err)
	}
	if d, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		return errors.Join(context.DeadlineExceeded, err)
	}
	return err
}

// Message is one received message (RecvMessage): its bytes and the
// connection to reply on.
type Message struct {
	Data []byte
	From Addr
	c    *Conn
}

// RecvMessage accepts the next connection and reads its whole message (up
// to maxSize bytes; zero means 16 MiB). Answer it with Reply, or Close it.
func (l *Listener) RecvMessage(maxSize int) (*Message, error) {
	if maxSize <= 0 {
		maxSize = 16 << 20
	}
	c, err := l.AcceptNDP()
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(c, int64(maxSize)+1))
	if err == nil && len(data) > maxSize {
		err = ErrMessageTooLarge
	}
	if err != nil {
		c.Abort()
		return nil, err
	}
	return &Message{Data: data, From: c.remote, c: c}, nil
}

// Reply sends resp as the response message and closes the connection.
func (m *Message) Reply(resp []byte) error {
	_, err := m.c.WriteAndClose(resp)
	if cerr := m.c.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close ends the message's connection with an empty response.
func (m *Message) Close() error { return m.Reply(nil) }

// Conn is the connection the message arrived on (for deadlines).
func (m *Message) Conn() *Conn { return m.c }
