package sim

import "errors"

func ReproduceOPF() ([]Table, error)   { return nil, errors.New("todo") }
func ReproduceOMNeT() ([]Table, error) { return nil, errors.New("todo") }
