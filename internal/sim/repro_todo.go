package sim

import "errors"

func ReproduceOMNeT() ([]Table, error) { return nil, errors.New("todo") }
