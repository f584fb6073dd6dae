"""Who owns what in a repository and whose approval a change needs, pure.

`approvers` lists the teams a pull request needs (gitopsq plan); `approval_check` judges whether an applied
change carries them (the sync's audit records) and finds approvals that can never be given.
"""
