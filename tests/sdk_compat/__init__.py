"""Run the OpenAI Agents SDK's own `SQLAlchemySession` tests against this library."""
