"""Kueue's scheduler benchmark run against minimalkueue and against gitopsq's admission loop (issue 10)."""
