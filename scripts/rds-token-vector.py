# Known-answer vector for the RDS IAM auth token, computed with botocore (independent of our Rust code).
import datetime
from unittest import mock
import botocore.session
from botocore.credentials import Credentials

FIXED = datetime.datetime(2024, 1, 15, 8, 30, 0)

class FixedDatetime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return FIXED
    @classmethod
    def now(cls, tz=None):
        return FIXED.replace(tzinfo=tz) if tz else FIXED

session = botocore.session.Session()
for token in [None, "SESSIONTOKEN/with+chars="]:
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    client = session.create_client("rds", region_name="eu-west-1", aws_access_key_id=creds.access_key,
                                   aws_secret_access_key=creds.secret_key, aws_session_token=token)
    with mock.patch("botocore.auth.datetime.datetime", FixedDatetime):
        print(client.generate_db_auth_token(DBHostname="mydb.abc123.eu-west-1.rds.amazonaws.com", Port=5432,
                                            DBUsername="outbox_relay", Region="eu-west-1"))
